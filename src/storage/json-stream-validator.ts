/**
 * Checks that a byte stream is one JSON text, as `JSON.parse` of its strict UTF-8 decoding
 * would, without building any value: memory stays a few bytes per nesting level whatever the
 * size of the output. Bytes are fed in chunks cut anywhere (`push`), then `end()`.
 *
 * @module
 */
import { ErrorCode, SonarError } from '../../actors/errors.js';

// Where the validator is between two bytes.
const S = {
  /** A value must come (the start, after `:` or after `,` in an array). */
  Value: 0,
  /** A value or `]` (just after `[`). */
  ValueOrClose: 1,
  /** A key or `}` (just after `{`). */
  KeyOrClose: 2,
  /** A key (after `,` in an object). */
  Key: 3,
  /** `:` after a key. */
  Colon: 4,
  /** A value just ended: `,`, the container's closer, or only whitespace at the top. */
  After: 5,
  String: 6,
  Escape: 7,
  /** Inside `\uXXXX`; `hexLeft` digits to go. */
  Unicode: 8,
  /** Inside `true`, `false` or `null`; `literal` and `literalAt` say where. */
  Literal: 9,
  /** After `-`. */
  Minus: 10,
  /** After a leading `0`. */
  Zero: 11,
  /** In the integer digits (not starting with 0). */
  Int: 12,
  /** After `.`: a digit must come. */
  Dot: 13,
  /** In the fraction digits. */
  Frac: 14,
  /** After `e` or `E`: a sign or a digit. */
  Exp: 15,
  /** After the exponent's sign: a digit. */
  ExpSign: 16,
  /** In the exponent digits. */
  ExpDigit: 17,
} as const;
type S = (typeof S)[keyof typeof S];

const BOM = [0xef, 0xbb, 0xbf];
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LITERALS: Record<number, Uint8Array> = {
  0x74: new TextEncoder().encode('true'),
  0x66: new TextEncoder().encode('false'),
  0x6e: new TextEncoder().encode('null'),
};

const isWhitespace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;
const isHex = (b: number): boolean =>
  isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
const ESCAPABLE = new Set([...'"\\/bfnrtu'].map((c) => c.charCodeAt(0)));

/** A byte as a reader would name it in an error message. */
const show = (b: number): string =>
  b >= 0x20 && b < 0x7f ? JSON.stringify(String.fromCharCode(b)) : `byte 0x${b.toString(16)}`;

/** Thrown by {@link JsonStreamValidator} for the first byte that cannot belong to JSON. */
export class InvalidJsonError extends SonarError {
  override readonly name = 'InvalidJsonError';
  constructor(message: string) {
    super(ErrorCode.Validation, message);
  }
}

export class JsonStreamValidator {
  private state: S = S.Value;
  /** Bytes seen so far: error messages name the offset. */
  private offset = 0;
  /** One bit per open container, 1 for an object: a bitset, so deep nesting stays small. */
  private stack = new Uint8Array(64);
  private depth = 0;
  private stringIsKey = false;
  private hexLeft = 0;
  private literal: Uint8Array = LITERALS[0x74]!;
  private literalAt = 0;
  /** Strict UTF-8, as the non-streaming check decoded it (it also drops a leading BOM). */
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true });
  /** Still within what may be a leading byte order mark. */
  private bomLeft = true;

  /** Feeds the next bytes. @throws InvalidJsonError at the first byte that is not JSON. */
  push(chunk: Uint8Array): void {
    try {
      this.utf8.decode(chunk, { stream: true });
    } catch (_err: unknown) {
      throw new InvalidJsonError(`invalid UTF-8 near byte ${this.offset}`);
    }
    let i = 0;
    // TextDecoder drops a leading byte order mark, so JSON.parse never saw one. A partial one
    // followed by anything else is invalid UTF-8, which the decoder refused above.
    while (this.bomLeft && i < chunk.byteLength && this.offset + i < 3) {
      if (chunk[i] !== BOM[this.offset + i]) this.bomLeft = false;
      else i++;
    }
    if (this.offset + i >= 3) this.bomLeft = false;
    const n = chunk.byteLength;
    while (i < n) {
      // Most bytes of a large output are inside strings: skip those a step would only pass.
      if (this.state === S.String) {
        let b = chunk[i]!;
        while (b !== QUOTE && b !== BACKSLASH && b >= 0x20 && ++i < n) b = chunk[i]!;
        if (i === n) break;
      }
      this.step(chunk[i]!, this.offset + i);
      i++;
    }
    this.offset += chunk.byteLength;
  }

  /** Ends the input. @throws InvalidJsonError when the text is incomplete. */
  end(): void {
    try {
      this.utf8.decode();
    } catch (_err: unknown) {
      throw new InvalidJsonError(`invalid UTF-8 at the end (byte ${this.offset})`);
    }
    if (this.depth === 0) {
      const s = this.state;
      if (s === S.After) return;
      if (s === S.Zero || s === S.Int || s === S.Frac || s === S.ExpDigit) return;
    }
    throw new InvalidJsonError(`unexpected end of JSON input at byte ${this.offset}`);
  }

  private fail(b: number, at: number): never {
    throw new InvalidJsonError(`unexpected ${show(b)} at byte ${at}`);
  }

  private open(isObject: boolean): void {
    const byte = this.depth >> 3;
    if (byte >= this.stack.byteLength) {
      const grown = new Uint8Array(this.stack.byteLength * 2);
      grown.set(this.stack);
      this.stack = grown;
    }
    const bit = 1 << (this.depth & 7);
    this.stack[byte] = isObject ? this.stack[byte]! | bit : this.stack[byte]! & ~bit;
    this.depth++;
  }

  private inObject(): boolean {
    const d = this.depth - 1;
    return (this.stack[d >> 3]! & (1 << (d & 7))) !== 0;
  }

  /** Closes the innermost container with `b` (`]` or `}`), if it is the right closer. */
  private close(b: number, at: number): void {
    if (this.depth === 0 || this.inObject() !== (b === 0x7d)) this.fail(b, at);
    this.depth--;
    this.state = S.After;
  }

  private startValue(b: number, at: number): void {
    if (b === QUOTE) {
      this.stringIsKey = false;
      this.state = S.String;
    } else if (b === 0x7b) {
      this.open(true);
      this.state = S.KeyOrClose;
    } else if (b === 0x5b) {
      this.open(false);
      this.state = S.ValueOrClose;
    } else if (b === 0x2d) this.state = S.Minus;
    else if (b === 0x30) this.state = S.Zero;
    else if (isDigit(b)) this.state = S.Int;
    else if (LITERALS[b]) {
      this.literal = LITERALS[b];
      this.literalAt = 1;
      this.state = S.Literal;
    } else this.fail(b, at);
  }

  /** The number ended at `b`: it must be a byte that may follow a value. */
  private endNumber(b: number, at: number): void {
    this.state = S.After;
    this.step(b, at);
  }

  private step(b: number, at: number): void {
    switch (this.state) {
      case S.Value:
        if (!isWhitespace(b)) this.startValue(b, at);
        return;
      case S.ValueOrClose:
        if (isWhitespace(b)) return;
        if (b === 0x5d) this.close(b, at);
        else this.startValue(b, at);
        return;
      case S.KeyOrClose:
        if (isWhitespace(b)) return;
        if (b === 0x7d) this.close(b, at);
        else if (b === QUOTE) {
          this.stringIsKey = true;
          this.state = S.String;
        } else this.fail(b, at);
        return;
      case S.Key:
        if (isWhitespace(b)) return;
        if (b !== QUOTE) this.fail(b, at);
        this.stringIsKey = true;
        this.state = S.String;
        return;
      case S.Colon:
        if (isWhitespace(b)) return;
        if (b !== 0x3a) this.fail(b, at);
        this.state = S.Value;
        return;
      case S.After:
        if (isWhitespace(b)) return;
        if (b === 0x2c && this.depth > 0) this.state = this.inObject() ? S.Key : S.Value;
        else if (b === 0x5d || b === 0x7d) this.close(b, at);
        else this.fail(b, at);
        return;
      case S.String:
        if (b === QUOTE) this.state = this.stringIsKey ? S.Colon : S.After;
        else if (b === BACKSLASH) this.state = S.Escape;
        else if (b < 0x20) this.fail(b, at);
        // Bytes from 0x80 are UTF-8, checked by the decoder in `push`.
        return;
      case S.Escape:
        if (!ESCAPABLE.has(b)) this.fail(b, at);
        if (b === 0x75) {
          this.hexLeft = 4;
          this.state = S.Unicode;
        } else this.state = S.String;
        return;
      case S.Unicode:
        if (!isHex(b)) this.fail(b, at);
        if (--this.hexLeft === 0) this.state = S.String;
        return;
      case S.Literal:
        if (b !== this.literal[this.literalAt]) this.fail(b, at);
        if (++this.literalAt === this.literal.byteLength) this.state = S.After;
        return;
      case S.Minus:
        if (b === 0x30) this.state = S.Zero;
        else if (isDigit(b)) this.state = S.Int;
        else this.fail(b, at);
        return;
      case S.Zero:
        if (b === 0x2e) this.state = S.Dot;
        else if (b === 0x65 || b === 0x45) this.state = S.Exp;
        else this.endNumber(b, at);
        return;
      case S.Int:
        if (isDigit(b)) return;
        if (b === 0x2e) this.state = S.Dot;
        else if (b === 0x65 || b === 0x45) this.state = S.Exp;
        else this.endNumber(b, at);
        return;
      case S.Dot:
        if (!isDigit(b)) this.fail(b, at);
        this.state = S.Frac;
        return;
      case S.Frac:
        if (isDigit(b)) return;
        if (b === 0x65 || b === 0x45) this.state = S.Exp;
        else this.endNumber(b, at);
        return;
      case S.Exp:
        if (b === 0x2b || b === 0x2d) this.state = S.ExpSign;
        else if (isDigit(b)) this.state = S.ExpDigit;
        else this.fail(b, at);
        return;
      case S.ExpSign:
        if (!isDigit(b)) this.fail(b, at);
        this.state = S.ExpDigit;
        return;
      case S.ExpDigit:
        if (!isDigit(b)) this.endNumber(b, at);
        return;
    }
  }
}
