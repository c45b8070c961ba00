/**
 * How many slots a worker may declare: every pulse lists the keys of the tasks it holds (at
 * most `slots` of them) in one registry entry, a KV put, which is one NATS message. A pulse
 * over the server's `max_payload` is refused, the key expires, and the worker's running tasks
 * are taken back while it still runs them. So the bound is computed from the entry's encoding
 * with every field at its longest and the message size, and checked at join (backend) and in
 * the worker's options.
 *
 * @module
 */
import { ValidationError } from '../actors/errors.js';

/** nats-server's default `max_payload`: 1 MiB. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** At most this many tags a worker (each is a consumer to pull from, and in every pulse). */
export const MAX_WORKER_TAGS = 64;

/** The join schema's cap on slots, whatever the message size allows. */
export const MAX_SLOTS_CAP = 10_000;

/** `host` and `instanceId` are at most this long (the join schema). */
const MAX_HOST_CHARS = 255;
const MAX_ID_CHARS = 64;
/** Headers of the KV put (`Nats-Expected-Last-Subject-Sequence` on a compare-and-set), with room. */
const HEADER_ROOM = 1024;
/** One `running` entry: `"<runId>.<taskId>",`, ids at their longest. */
const RUNNING_KEY_BYTES = MAX_ID_CHARS + 1 + MAX_ID_CHARS + 3;

/**
 * The entry without its `running` keys, every field at its longest: ids of 64 characters,
 * `host` and `instanceId` of 255 characters that JSON escapes to 6 bytes each, 64 tags.
 */
const FIXED_BYTES = Buffer.byteLength(
  JSON.stringify({
    workerId: 'w'.repeat(MAX_ID_CHARS),
    host: '\u0000'.repeat(MAX_HOST_CHARS),
    instanceId: '\u0000'.repeat(MAX_HOST_CHARS),
    tags: Array.from({ length: MAX_WORKER_TAGS }, () => 't'.repeat(MAX_ID_CHARS)),
    slots: MAX_SLOTS_CAP,
    active: false,
    pulseAt: '2026-01-01T00:00:00.000Z',
    running: [],
  }),
);

/**
 * The most slots whose full pulse fits in a message of `maxPayload` bytes (7,878 for the
 * default 1 MiB), and never more than {@link MAX_SLOTS_CAP}.
 */
export function maxSlotsFor(maxPayload: number): number {
  const room = maxPayload - FIXED_BYTES - HEADER_ROOM;
  return Math.max(0, Math.min(MAX_SLOTS_CAP, Math.floor(room / RUNNING_KEY_BYTES)));
}

/** Throws a ValidationError at `slots` when its full pulse would not fit in `maxPayload`. */
export function assertSlotsFit(slots: number, maxPayload: number): void {
  const max = maxSlotsFor(maxPayload);
  if (slots <= max) return;
  const message =
    `is ${slots}, over ${max}: a pulse lists every task a worker holds and must fit in one ` +
    `NATS message (max_payload ${maxPayload} bytes); run more workers with fewer slots`;
  throw new ValidationError(`'slots' ${message}`, [{ path: 'slots', message }]);
}
