import type { StepIndex } from '../projection.js';

/**
 * A step's Pending tasks in creation (`TaskCreated`) order, read one at a time, so that a tick
 * reads only as far as it places. Never-published tasks come from `fresh`, whose insertion
 * order already is the creation order; tasks back from an attempt (the few in `returned`, plus
 * those requeued in this very tick) are sorted by creation order and merged in.
 */
export class PendingOrder {
  private readonly fresh: Iterator<string>;
  private freshHead: string | undefined;
  private readonly back: string[];
  private backAt = 0;

  constructor(
    private readonly index: StepIndex,
    requeuedNow: readonly string[] = [],
  ) {
    this.fresh = index.fresh.values();
    this.freshHead = this.pull();
    const back =
      requeuedNow.length === 0 ? [...index.returned] : [...index.returned, ...requeuedNow];
    this.back = back.sort((a, b) => this.orderOf(a) - this.orderOf(b));
  }

  /** The next Pending task key, or undefined when there is none left. */
  next(): string | undefined {
    const b = this.back[this.backAt];
    const f = this.freshHead;
    if (b !== undefined && (f === undefined || this.orderOf(b) < this.orderOf(f))) {
      this.backAt++;
      return b;
    }
    if (f !== undefined) this.freshHead = this.pull();
    return f;
  }

  private pull(): string | undefined {
    const r = this.fresh.next();
    return r.done ? undefined : r.value;
  }

  private orderOf(key: string): number {
    return this.index.order.get(key) ?? Number.MAX_SAFE_INTEGER;
  }
}
