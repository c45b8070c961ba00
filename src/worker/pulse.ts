import type { KV } from '@nats-io/kv';
import type { Logger } from '../log.js';
import type { RegistryEntry } from '../protocol.js';

/** The entry's fields the worker decides; `pulseAt` is stamped at each put. */
export type PulseEntry = Omit<RegistryEntry, 'pulseAt'>;

/**
 * Keeps the worker's registry entry alive in `<prefix>_workers` (DESIGN.md section 4): a KV
 * put every interval, which restarts the bucket TTL. When the puts stop (the process died,
 * or its network did), the key expires and the reconciler recovers the worker's tasks.
 */
export class Pulse {
  private timer: NodeJS.Timeout | null = null;
  private last: Promise<void> = Promise.resolve();

  constructor(
    private readonly kv: KV,
    private readonly entry: () => PulseEntry,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  /** Puts the entry now, then every interval. */
  async start(): Promise<void> {
    if (this.timer) return; // started already: one loop of puts, never two
    await this.beat();
    this.timer = setInterval(() => {
      void this.beat().catch((err: unknown) => this.log.warn('pulse failed', { err }));
    }, this.intervalMs);
    // A pulse alone never keeps the process alive.
    this.timer.unref();
  }

  /** Puts the entry now (after a change such as `active: false`), in order with the others. */
  beat(): Promise<void> {
    const put = async (): Promise<void> => {
      await this.kv.put(
        this.entry().workerId,
        JSON.stringify({ ...this.entry(), pulseAt: new Date().toISOString() }),
      );
    };
    this.last = this.last.then(put, put);
    return this.last;
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
    await this.kv.delete(this.entry().workerId);
  }
}
