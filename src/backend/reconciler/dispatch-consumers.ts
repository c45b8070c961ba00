import type { JetStreamManager } from '@nats-io/jetstream';
import type { Names } from '../../../streams/names.js';
import { ensureDispatchConsumer } from '../../../streams/provision.js';

/** How long a consumer this process made sure of is trusted without asking the server again. */
export const DISPATCH_CONSUMER_RECHECK_MS = 30_000;

/**
 * The `dispatch_<tag>` consumers this process made sure of (DESIGN.md section 2), so that the
 * leader does not ask the server before every publish. The cache must not outlive the
 * consumer: the full sweep deletes a tag's consumer once no worker advertised the tag for a
 * day, and a worker may join just then. So an entry is trusted for a bounded time only (the
 * sweep may run in another backend, or in `sonar sweep`), and is dropped at once when this
 * process's sweep deletes the consumer. `join` always asks the server (`force`): it is how a
 * worker whose consumer vanished has it recreated (src/worker/worker.ts).
 */
export class DispatchConsumers {
  private readonly ensuredAt = new Map<string, number>();

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly names: Names,
    private readonly monotonic: () => number = () => performance.now(),
    private readonly recheckMs = DISPATCH_CONSUMER_RECHECK_MS,
  ) {}

  /** Creates the tag's consumer unless this process made sure of it within the recheck time. */
  async ensure(tag: string, opts: { force?: boolean } = {}): Promise<void> {
    const at = this.ensuredAt.get(tag);
    if (!opts.force && at !== undefined && this.monotonic() - at < this.recheckMs) return;
    await ensureDispatchConsumer(this.jsm, this.names, tag);
    this.ensuredAt.set(tag, this.monotonic());
  }

  /** The tag's consumer was deleted: the next `ensure` asks the server. */
  forget(tag: string): void {
    this.ensuredAt.delete(tag);
  }
}
