import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '../../log.js';

/** The first wait between two probes of a sink that is down; it doubles up to the cap. */
export const PROBE_BASE_MS = 250;
export const PROBE_CAP_MS = 5_000;

/**
 * The finalizer pool's circuit breaker on its results sink. A write that fails because the
 * sink cannot be reached trips it: from then on the pool pulls no job, the jobs in hand wait
 * (their leases renewed) instead of failing, and the sink is probed until it answers; then
 * the held jobs run again. A job therefore spends no delivery on an outage, however long,
 * and the outage poisons nothing. Only that class of error trips it: a record the sink
 * refuses, or any other failure, takes the job's usual retries.
 */
export class SinkBreaker {
  private closed: Promise<void> | null = null;
  private trippedAt = 0;
  /** Times it opened since start. */
  trips = 0;

  constructor(
    /** Resolves once the sink answers; without one, held jobs retry after each wait. */
    private readonly probe: (() => Promise<void>) | undefined,
    private readonly log: Logger,
    /** Aborted when the pool stops: every wait ends then. */
    private readonly signal: AbortSignal,
    /** Told `true` when it opens, `false` when it closes (the pool's metrics). */
    private readonly onChange: (paused: boolean) => void = () => {},
  ) {}

  get isOpen(): boolean {
    return this.closed !== null;
  }

  /** At once while closed; while open, once a probe succeeds or the pool stops. */
  whenClosed(): Promise<void> {
    return this.closed ?? Promise.resolve();
  }

  /** Opens the breaker (once, however many jobs report the outage) and starts probing. */
  trip(err: unknown): Promise<void> {
    if (this.closed) return this.closed;
    this.trips++;
    this.trippedAt = Date.now();
    this.log.warn('results sink unavailable: finalizers paused', {
      error: err instanceof Error ? err.message : String(err),
    });
    this.onChange(true);
    this.closed = this.probeUntilUp().finally(() => {
      this.closed = null;
      this.onChange(false);
    });
    return this.closed;
  }

  private async probeUntilUp(): Promise<void> {
    let waitMs = PROBE_BASE_MS;
    let last = '';
    while (!this.signal.aborted) {
      await delay(waitMs, undefined, { signal: this.signal }).catch(() => {});
      if (this.signal.aborted) return;
      try {
        await this.probe?.();
        this.log.info('results sink back: finalizers resumed', {
          pausedMs: Date.now() - this.trippedAt,
        });
        return;
      } catch (err: unknown) {
        const message = err instanceof Error ? err.message : String(err);
        // Once per change of cause: a long outage is one line, not one per probe.
        if (message !== last) this.log.warn('results sink still unavailable', { error: message });
        last = message;
      }
      waitMs = Math.min(PROBE_CAP_MS, waitMs * 2);
    }
  }
}
