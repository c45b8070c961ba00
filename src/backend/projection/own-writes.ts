import type { NewEvent } from '../../../streams/event-store.js';

/**
 * The events this backend is appending, by subject, with the exact bytes it publishes, so
 * that its projection loop knows them when the stream delivers them back and applies the
 * event the writer already validated instead of parsing and validating the payload again
 * (in the submit bench profile, that second parse and validation was a visible share of the
 * backend's CPU; comparing the bytes costs a fraction of it; docs/benchmarks.md).
 *
 * Why the bytes and not the event id: another backend may store the same id with other data
 * (two run files racing for one runId; the loser's publish is then a duplicate). A payload
 * byte for byte equal to the one encoded from a validated event decodes to that event,
 * whoever stored it, so a match is always safe (the only values JSON does not give back as
 * they were, -0 and numbers past a double's range, print the same wherever the projection is
 * sent as JSON); anything else is decoded as usual. An entry
 * is only a shortcut: losing one (two writes to one subject at once keep the last) costs a
 * decode, never correctness.
 */
export class OwnWrites {
  private readonly bySubject = new Map<string, { payload: Uint8Array; event: NewEvent }>();

  /** Called before publishing `payload`, the encoding of the validated `event`. */
  expect(subject: string, payload: Uint8Array, event: NewEvent): void {
    this.bySubject.set(subject, { payload, event });
  }

  /** Called once the write is settled and applied (or failed): drops it if still there. */
  forget(subject: string, payload: Uint8Array): void {
    if (this.bySubject.get(subject)?.payload === payload) this.bySubject.delete(subject);
  }

  /** The validated event when `payload` is byte for byte what this process wrote to `subject`. */
  recognize(subject: string, payload: Uint8Array): NewEvent | undefined {
    const own = this.bySubject.get(subject);
    if (!own || Buffer.compare(own.payload, payload) !== 0) return undefined;
    this.bySubject.delete(subject);
    return own.event;
  }

  /** Entries not yet delivered back (for tests). */
  get size(): number {
    return this.bySubject.size;
  }
}
