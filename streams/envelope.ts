import { EVENT_VERSION } from '../actors/events.js';
import type { Result } from '../actors/events.js';
import { DecodeError } from '../actors/errors.js';

/** The stored payload of every event (DESIGN.md section 3). `id` is also the Nats-Msg-Id. */
export interface Envelope {
  id: string;
  type: string;
  v: number;
  data: unknown;
}

const decoder = new TextDecoder();

export function encodeEnvelope(e: { id: string; type: string; data: unknown }): Uint8Array {
  // Buffer.from, not TextEncoder: small buffers come from Node's pool instead of an
  // ArrayBuffer each, which the bulk write path feels per event (bench/submit.ts).
  return Buffer.from(JSON.stringify({ id: e.id, type: e.type, v: EVENT_VERSION, data: e.data }));
}

/**
 * Decodes a stored payload. Only the envelope shape is checked here; the event data is
 * validated against its schema when it is applied (actors/events.ts `decodeEvent`).
 */
export function decodeEnvelope(bytes: Uint8Array): Result<Envelope> {
  let raw: unknown;
  try {
    raw = JSON.parse(decoder.decode(bytes));
  } catch (err: unknown) {
    return { ok: false, error: new DecodeError('payload is not JSON', { cause: err }) };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { ok: false, error: new DecodeError('payload is not a JSON object') };
  }
  const o = raw as Partial<Envelope>;
  if (typeof o.type !== 'string') return { ok: false, error: new DecodeError("'type' is missing") };
  if (typeof o.id !== 'string') o.id = '';
  if (typeof o.v !== 'number') o.v = EVENT_VERSION;
  // The parsed object is the envelope: no copy on the replay path.
  return { ok: true, value: o as Envelope };
}
