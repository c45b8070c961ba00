import type { KV } from '@nats-io/kv';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { isWrongLastSequence } from '../../streams/errors.js';
import { settleWithin } from '../grace.js';
import type { Logger } from '../log.js';
import type { RegistryEntry } from '../protocol.js';

/** How long the first pulse, which proves the worker can write its key, may take. */
const FIRST_PULSE_BOUND_MS = 10_000;

/** The entry's fields the worker decides; `pulseAt` is stamped at each put. */
export type PulseEntry = Omit<RegistryEntry, 'pulseAt'>;

/** The worker's registry key vanished, and the backend says it is Lost (or Left). */
export class KeyVanishedError extends SonarError {
  override readonly name = 'KeyVanishedError';
  constructor(workerId: string) {
    super(
      ErrorCode.Conflict,
      `worker ${workerId} is Lost: its registry key vanished and the backend no longer counts it ` +
        `joined (a stall longer than the pulse TTL, or a supervisor reported it gone); a worker id ` +
        `is used once; exit and start a new worker`,
      { workerId },
    );
  }
}

/** What the backend says of a worker whose key vanished: still joined, or gone for good. */
export type Standing = 'joined' | 'gone';

/**
 * Keeps the worker's registry entry alive in `<prefix>_workers` (DESIGN.md section 4): a KV
 * put every interval, which restarts the bucket TTL. When the puts stop (the process died,
 * or its network did), the key expires and the reconciler recovers the worker's tasks.
 *
 * Each pulse after the first is a compare-and-set on the revision of the one before, so a
 * worker whose key vanished meanwhile learns it at its next pulse, even when idle. A key
 * vanishes for two reasons that must end differently:
 * - an outage longer than the pulse TTL (the server was down, or had no quorum): the key
 *   expired, but no backend judged the worker, since the reconciler waits a pulse TTL of
 *   steady contact after an outage. The worker must carry on with its tasks.
 * - a backend declared the worker Lost (`WorkerLost`, then a delete of its key): DESIGN.md
 *   section 4 has it exit, so that its supervisor starts it afresh.
 *
 * So the pulse puts the key back first, then asks `standing()` (the worker repeats its
 * join, which a backend answers `conflict` for a Lost or Left worker). `gone` calls
 * `onVanished` once and stops. Put first, ask second: a backend that declares the worker
 * Lost after the answer deletes the key again, and the next pulse asks again. An
 * unanswered question is asked again at every pulse until answered.
 */
export class Pulse {
  private timer: NodeJS.Timeout | null = null;
  private last: Promise<void> = Promise.resolve();
  private revision: number | null = null;
  /** Set once the key vanished or was removed on purpose: no put or verdict after that. */
  private closed = false;
  /** Bumped by every put: a put abandoned at its bound that settles late changes nothing. */
  private generation = 0;
  /** A timer beat waits behind a slow one: skip the next rather than pile them up. */
  private queued = false;
  /** The key was put back after it vanished, and the backend has not yet said `joined`. */
  private unconfirmed = false;
  /** See {@link Pulse.start}. */
  private firstBy = Infinity;
  /** See {@link Pulse.leaving}. */
  private goingAway = false;

  constructor(
    private readonly kv: KV,
    private readonly entry: () => PulseEntry,
    private readonly intervalMs: number,
    private readonly log: Logger,
    private readonly onVanished: (err: KeyVanishedError) => void = () => {},
    private readonly standing: () => Promise<Standing> = () => Promise.resolve('gone'),
  ) {}

  /**
   * Puts the entry now, then every interval. `firstBy` (a `performance.now()` time): when the
   * first put lands later than that, the next beat asks the worker's standing as for a key
   * put back.
   * The first put has no revision to compare against, so a worker stalled between its join
   * and its first pulse, long enough to be declared Lost, would otherwise put its key over
   * the backend's delete (or after that marker expired) and pulse on, Lost and never told.
   */
  async start(firstBy = Infinity): Promise<void> {
    if (this.timer) return; // started already: one loop of puts, never two
    this.firstBy = firstBy;
    // The first put may wait longer: no later pulse queues behind it, and a server slow to
    // answer a worker's first write (a loaded machine, a node just elected) must not end
    // the worker before it ever served.
    await this.beat(FIRST_PULSE_BOUND_MS);
    if (this.closed) return; // removed meanwhile
    this.timer = setInterval(() => {
      if (this.queued) return;
      this.queued = true;
      void this.beat()
        .catch((err: unknown) => this.log.warn('pulse failed', { err }))
        .finally(() => {
          this.queued = false;
        });
    }, this.intervalMs);
    // A pulse alone never keeps the process alive.
    this.timer.unref();
  }

  /** Puts the entry now (after a change such as `active: false`), in order with the others. */
  beat(atLeastMs = 0): Promise<void> {
    // Bounded: the puts run one after another, so one that never settled (seen once in the
    // cluster chaos scenario while a node died) would hold every later pulse, and the worker
    // would never learn that its key expired. A pulse later than two intervals is moot anyway.
    const boundMs = Math.max(1_000, 2 * this.intervalMs, atLeastMs);
    const bounded = async (): Promise<void> => {
      const work = this.put(++this.generation);
      if ((await settleWithin(work, boundMs)) === 'timeout') {
        work.catch(() => {});
        throw new SonarError(ErrorCode.Unavailable, `pulse not answered within ${boundMs} ms`, {
          boundMs,
        });
      }
      await work;
    };
    this.last = this.last.then(bounded, bounded);
    return this.last;
  }

  /**
   * The worker is saying `leave`, whose handler deletes the key: from now on a key found gone
   * is that goodbye, never a verdict. The pulse neither puts it back nor asks, and stops; a
   * put already in flight when the delete lands is such a put. Until then it pulses on, so a
   * `leave` that waits out an outage does not let the key expire.
   */
  leaving(): void {
    this.goingAway = true;
  }

  /** Whether put number `gen` still speaks for the worker (not closed, not overtaken). */
  private current(gen: number): boolean {
    return !this.closed && gen === this.generation;
  }

  private async put(gen: number): Promise<void> {
    if (!this.current(gen)) return;
    const workerId = this.entry().workerId;
    if (this.revision === null) {
      const revision = await this.kv.put(workerId, this.value());
      if (!this.current(gen)) return;
      this.revision = revision;
      // Asked at the next beat, not within the first put's bound: a backend slow to answer
      // (restarting, which may be why the join was slow) must not fail the worker's start.
      if (performance.now() > this.firstBy) this.unconfirmed = true;
      return;
    } else {
      try {
        const revision = await this.kv.update(workerId, this.value(), this.revision);
        if (this.current(gen)) this.revision = revision;
      } catch (err: unknown) {
        if (!isWrongLastSequence(err)) throw err;
        if (this.current(gen)) await this.reconcile(workerId, gen);
      }
    }
    if (this.unconfirmed && this.current(gen) && !this.goingAway) await this.confirm(workerId);
  }

  /** Asks whether the worker is still joined; `gone` ends the pulse for good. */
  private async confirm(workerId: string): Promise<void> {
    let answer: Standing;
    try {
      answer = await this.standing();
    } catch (err: unknown) {
      this.log.warn('registry key put back; standing not known yet, asking again next pulse', {
        err,
      });
      return;
    }
    if (this.closed || this.goingAway) return;
    this.unconfirmed = false;
    if (answer === 'joined') {
      this.log.info('registry key put back, or first pulse late: still joined, carrying on');
      return;
    }
    this.closed = true;
    this.stop();
    this.onVanished(new KeyVanishedError(workerId));
  }

  /** The entry as it is now, stamped now. */
  private value(): string {
    return JSON.stringify({ ...this.entry(), pulseAt: new Date().toISOString() });
  }

  /**
   * A compare-and-set lost. Either a put whose reply we missed did land (the key holds a
   * newer revision of ours: adopt it and put again, with the entry as it is now), or the key
   * is gone (expired in an outage, or deleted by a backend that declared the worker Lost):
   * put it back, and let `confirm` ask which. The read is answered by the bucket's stream
   * leader (the bucket is opened without direct gets).
   */
  private async reconcile(workerId: string, gen: number): Promise<void> {
    const now = await this.kv.get(workerId);
    if (!this.current(gen)) return;
    if (now !== null && now.operation === 'PUT') {
      const revision = await this.kv.update(workerId, this.value(), now.revision);
      if (this.current(gen)) this.revision = revision;
      return;
    }
    if (this.goingAway) {
      this.closed = true;
      this.stop();
      return;
    }
    // Gone: put it back first (create: nobody else may have put it meanwhile), then ask.
    // Ask whatever becomes of this put: a later beat that adopts the key must still ask.
    this.unconfirmed = true;
    const revision = await this.kv.create(workerId, this.value());
    if (this.current(gen)) this.revision = revision;
  }

  /** Stops the puts; the key stays until {@link Pulse.remove} or its TTL. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Stops and deletes the key: the worker is gone on purpose. */
  async remove(): Promise<void> {
    this.stop();
    await this.last.catch(() => {});
    // Closed first: a late put that then sees the delete marker is not a vanished key.
    this.closed = true;
    await this.kv.delete(this.entry().workerId);
  }
}
