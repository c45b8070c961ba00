/**
 * The streaming JSON check the finalizer runs on `json` outputs must accept exactly what
 * `JSON.parse` of the strict UTF-8 decoding accepts, however the bytes are cut into chunks.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidJsonError, JsonStreamValidator } from '../../src/storage/json-stream-validator.js';

const strict = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** The reference: what the finalizer did before it streamed. */
function parses(bytes: Uint8Array): boolean {
  try {
    JSON.parse(strict.decode(bytes));
    return true;
  } catch (_err: unknown) {
    return false;
  }
}

/** The validator's verdict on `bytes` fed in pieces cut at `cuts`. */
function validates(bytes: Uint8Array, cuts: number[] = []): boolean {
  const v = new JsonStreamValidator();
  const at = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  try {
    let from = 0;
    for (const to of [...at, bytes.byteLength]) {
      v.push(bytes.subarray(from, to));
      from = to;
    }
    v.end();
    return true;
  } catch (err: unknown) {
    if (!(err instanceof InvalidJsonError)) throw err;
    return false;
  }
}

const cuts = fc.array(fc.nat(), { maxLength: 6 });

/** Bytes near JSON: a valid text with a few bytes changed, dropped or inserted. */
const nearJson = fc
  .tuple(
    fc.json(),
    fc.array(
      fc.tuple(
        fc.nat(),
        fc.constantFrom(
          '',
          ',',
          ']',
          '}',
          '"',
          '\\',
          '0',
          '.',
          'e',
          '-',
          ' ',
          '\u0001',
          'x',
          '\u00e9',
        ),
        fc.boolean(),
      ),
    ),
  )
  .map(([text, edits]) => {
    let s = text;
    for (const [pos, ch, replace] of edits) {
      const p = pos % (s.length + 1);
      s = s.slice(0, p) + ch + s.slice(replace ? p + 1 : p);
    }
    return encoder.encode(s);
  });

describe('JsonStreamValidator', () => {
  it('accepts every JSON text, cut anywhere', () => {
    fc.assert(
      fc.property(fc.json(), cuts, (text, c) => validates(encoder.encode(text), c)),
      { numRuns: 2_000 },
    );
  });

  it('agrees with JSON.parse on text near JSON', () => {
    fc.assert(
      fc.property(nearJson, cuts, (bytes, c) => validates(bytes, c) === parses(bytes)),
      { numRuns: 5_000 },
    );
  });

  it('agrees with JSON.parse on arbitrary bytes', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 40 }),
        cuts,
        (bytes, c) => validates(bytes, c) === parses(bytes),
      ),
      { numRuns: 5_000 },
    );
  });

  it('agrees with JSON.parse on the edge cases by hand', () => {
    const cases = [
      '',
      ' ',
      '0',
      '-0',
      '01',
      '-',
      '1.',
      '.5',
      '1e',
      '1e+',
      '1E-2',
      '-01',
      '2.5e10',
      'true',
      'tru',
      'truex',
      'nul',
      'null ',
      '"a',
      '"\\u12"',
      '"\\u12af"',
      '"\\x"',
      '"\t"',
      '[1,]',
      '[,1]',
      '{"a":1,}',
      '{"a" 1}',
      '{1:2}',
      '[]',
      '{}',
      '[[]]]',
      '{]',
      '[}',
      '"a" "b"',
      '1 2',
      '\ufeff{}',
      '{"a":[{"b":null}]}',
      '"\u00e9\u{1f600}"',
    ];
    for (const text of cases) {
      const bytes = encoder.encode(text);
      expect([text, validates(bytes)]).toEqual([text, parses(bytes)]);
      expect([text, validates(bytes, [1, 2, 3, 5, 8])]).toEqual([text, parses(bytes)]);
    }
    const bad = [
      new Uint8Array([0x22, 0xc3, 0x22]),
      new Uint8Array([0x22, 0xed, 0xa0, 0x80, 0x22]),
    ];
    for (const bytes of bad) expect(validates(bytes)).toBe(false);
  });

  it('takes a million levels of nesting in little memory, with a clear error', () => {
    const depth = 1_000_000;
    const bytes = encoder.encode('['.repeat(depth) + ']'.repeat(depth));
    expect(validates(bytes, [12_345, 999_999])).toBe(true);
    const open = new JsonStreamValidator();
    open.push(encoder.encode('{"a": [1'));
    expect(() => open.end()).toThrow('unexpected end of JSON input at byte 8');
    expect(() => new JsonStreamValidator().push(encoder.encode('{"a": [1, 2,, 3]}'))).toThrow(
      'unexpected "," at byte 12',
    );
  });
});
