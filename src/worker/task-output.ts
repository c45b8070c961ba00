import { INLINE_OUTPUT_MAX } from '../storage/output-store.js';

/** A result's `output` (DESIGN.md section 6, step 6). */
export type ResultOutput = { inline: string; bytes: number } | { ref: string; bytes: number };

/** The output bytes of a handler's return value: bytes as they are, a string as UTF-8,
 * `undefined` as empty, anything else as JSON. */
export function toBytes(value: unknown): Uint8Array {
  if (value instanceof Uint8Array) return value;
  if (value === undefined) return new Uint8Array();
  if (typeof value === 'string') return new TextEncoder().encode(value);
  return new TextEncoder().encode(JSON.stringify(value));
}

/**
 * Inline (base64) up to 16 KiB; larger outputs are uploaded first and travel as their ref,
 * so the result request stays small whatever the output's size.
 */
export async function packOutput(
  bytes: Uint8Array,
  upload: (bytes: Uint8Array) => Promise<string>,
): Promise<ResultOutput> {
  if (bytes.byteLength <= INLINE_OUTPUT_MAX) {
    return { inline: Buffer.from(bytes).toString('base64'), bytes: bytes.byteLength };
  }
  return { ref: await upload(bytes), bytes: bytes.byteLength };
}
