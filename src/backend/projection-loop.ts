import { applyEvent, createProjection } from '../../actors/projection.js';
import type { Applied, EventRecord, Projection } from '../../actors/projection.js';
import { parseEventSubject } from '../../actors/events.js';
import type { EventStore } from '../../streams/event-store.js';
import type { Logger } from '../log.js';
import { OwnWrites } from './own-writes.js';

export type AppliedListener = (applied: Applied, record: EventRecord) => void;

/**
 * Keeps one process's projection live: replays the events stream to its end at start, then
 * follows it. It is the only code that applies events in the backend, so the write path and
 * the replay path are one: writers append, then wait for this loop to reach their sequence.
 */
export class ProjectionLoop {
  readonly projection: Projection = createProjection();
  /** What this process's writer is appending: applied without a second decode (own-writes.ts). */
  readonly ownWrites = new OwnWrites();
  /** Stream sequence of the last record this loop has applied (or skipped). */
  position = 0;
  private waiters: { seq: number; resolve: () => void }[] = [];
  private listeners: AppliedListener[] = [];
  private closer: (() => Promise<void>) | null = null;
  private done: Promise<void> | null = null;
  private skippedCount = 0;
  private stopped = false;

  constructor(
    private readonly store: EventStore,
    private readonly log: Logger,
  ) {}

  /** Calls `fn` after each applied event (not during the initial replay). */
  onApplied(fn: AppliedListener): () => void {
    this.listeners.push(fn);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== fn);
    };
  }

  get skipped(): number {
    return this.skippedCount;
  }

  /**
   * Replays to the end of the stream, then follows it in the background. Given a snapshot
   * (src/backend/snapshot.ts), starts from its state and replays only the events after it.
   */
  async start(
    from?: { header: { seq: number; skipped: number }; projection: Projection } | null,
  ): Promise<void> {
    const started = performance.now();
    if (from) {
      // In place: nothing holds the projection yet, but keep the one object regardless.
      Object.assign(this.projection, from.projection);
      this.position = from.header.seq;
      this.skippedCount = from.header.skipped;
    }
    await this.store.replay((r) => this.apply(r, false), { fromSeq: this.position + 1 });
    this.log.info('projection replayed', {
      seq: this.position,
      tasks: this.projection.tasks.size,
      ...(from && { snapshotSeq: from.header.seq, tail: this.position - from.header.seq }),
      ms: Math.round(performance.now() - started),
    });
    const { close, closed } = await this.store.followEach((r) => this.apply(r, true), {
      fromSeq: this.position + 1,
      recognize: (subject, payload) => this.ownWrites.recognize(subject, payload),
    });
    this.closer = close;
    this.done = closed.then((err) => {
      if (err) this.log.error('projection loop stopped', { err });
    });
  }

  private apply(r: EventRecord, live: boolean): void {
    if (r.seq <= this.position) return; // a redelivery after an ordered consumer reset
    const outcome = applyEvent(this.projection, r);
    this.position = r.seq;
    if (outcome.ok) {
      if (live) for (const l of this.listeners) l(outcome, r);
    } else {
      this.skippedCount++;
      const ref = parseEventSubject(r.subject);
      this.log.warn('event skipped', {
        seq: r.seq,
        subject: r.subject,
        key: ref?.key,
        reason: outcome.reason,
      });
    }
    if (this.waiters.length > 0) this.release();
  }

  private release(): void {
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (w.seq <= this.position) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }

  /** Resolves once the loop has applied stream sequence `seq` (read-your-writes). */
  waitFor(seq: number): Promise<void> {
    // Once stopped nothing more is applied: a writer left running past a bounded stop (a
    // straggler) must not wait forever, as the waiters at stop time do not.
    if (seq <= this.position || this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ seq, resolve }));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.closer?.();
    await this.done;
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
  }
}
