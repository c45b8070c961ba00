import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import { DEFAULT_MAX_PAYLOAD, maxSlotsFor } from '../../src/pulse-size.js';
import { resolveWorkerOptions } from '../../src/worker/options.js';

const handler = () => undefined;

describe('maxSlotsFor', () => {
  it('leaves room for a worst-case entry and its headers in the message', () => {
    const bound = maxSlotsFor(DEFAULT_MAX_PAYLOAD);
    expect(bound).toBe(7_878);
    const entry = JSON.stringify({
      workerId: 'w'.repeat(64),
      host: '\u0000'.repeat(255),
      instanceId: '\u0000'.repeat(255),
      tags: Array.from({ length: 64 }, (_, i) => `${i}`.padStart(64, 't')),
      slots: bound,
      active: false,
      pulseAt: '2026-01-01T00:00:00.000Z',
      running: Array.from(
        { length: bound },
        (_, i) => `${'r'.repeat(64)}.${`${i}`.padStart(64, 't')}`,
      ),
    });
    expect(Buffer.byteLength(entry) + 1024).toBeLessThanOrEqual(DEFAULT_MAX_PAYLOAD);
    expect(maxSlotsFor(64 * 1024 * 1024)).toBe(10_000);
    expect(maxSlotsFor(1024)).toBe(0);
  });
});

describe('resolveWorkerOptions', () => {
  const refusal = (opts: { tags: string[]; slots?: number }): ValidationError => {
    try {
      resolveWorkerOptions({ ...opts, handler });
    } catch (err: unknown) {
      if (err instanceof ValidationError) return err;
      throw err;
    }
    throw new Error('the options were accepted');
  };

  it('refuses more slots than a pulse can list, naming slots and the bound', () => {
    expect(resolveWorkerOptions({ tags: ['a'], slots: 7_878, handler }).slots).toBe(7_878);
    const err = refusal({ tags: ['a'], slots: 7_879 });
    expect(err.issues).toEqual([
      { path: 'slots', message: expect.stringMatching(/^is 7879, over 7878: a pulse/) as unknown },
    ]);
    expect(refusal({ tags: ['a'], slots: 0 }).issues[0]!.path).toBe('slots');
    expect(refusal({ tags: ['a'], slots: 1.5 }).issues[0]!.path).toBe('slots');
  });

  it('refuses no tags, more than 64, and a tag that is not an id', () => {
    expect(refusal({ tags: [] }).message).toBe("'tags' needs at least one tag");
    const many = Array.from({ length: 65 }, (_, i) => `t${i}`);
    expect(refusal({ tags: many }).message).toBe("'tags' has 65 tags, over 64");
    expect(refusal({ tags: ['a', 'b c'] }).issues[0]!.path).toBe('tags.1');
  });
});
