import type { StepIndex } from '../projection.js';

/** Which of a step's Pending tasks a reader takes (priority-order.ts makes one per priority). */
export interface PendingLane {
  /** Never-published tasks to read in place of the step's `fresh`, in creation order. */
  fresh?: Iterable<string>;
  /** Never-published tasks to pass over (of another priority, or with a notBefore to come). */
  skip?: (key: string) => boolean;
  /** Tasks back from an attempt to read in place of all of them (requeued in this tick too). */
  back?: readonly string[];
}

/**
 * A step's Pending tasks in creation (`TaskCreated`) order, read one at a time, so that a tick
 * reads only as far as it places. Never-published tasks come from `fresh`, whose insertion
 * order already is the creation order; tasks back from an attempt (the few in `returned`, plus
 * those requeued in this very tick) are sorted by creation order and merged in.
 */
export class PendingOrder {
  private readonly fresh: Iterator<string>;
  private readonly skip: ((key: string) => boolean) | undefined;
  private freshHead: string | undefined;
  private readonly back: string[];
  private backAt = 0;

  constructor(
    private readonly index: StepIndex,
    requeuedNow: readonly string[] = [],
    lane: PendingLane = {},
  ) {
    this.fresh = (lane.fresh ?? index.fresh)[Symbol.iterator]();
    this.skip = lane.skip;
    this.freshHead = this.pull();
    const back =
      lane.back !== undefined
        ? [...lane.back]
        : requeuedNow.length === 0
          ? [...index.returned]
          : [...index.returned, ...requeuedNow];
    this.back = back.sort((a, b) => this.orderOf(a) - this.orderOf(b));
  }

  /** The task `next()` would give, without taking it. */
  peek(): string | undefined {
    const b = this.back[this.backAt];
    const f = this.freshHead;
    return b !== undefined && (f === undefined || this.orderOf(b) < this.orderOf(f)) ? b : f;
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
    for (;;) {
      const r = this.fresh.next();
      if (r.done) return undefined;
      if (this.skip === undefined || !this.skip(r.value)) return r.value;
    }
  }

  private orderOf(key: string): number {
    return this.index.order.get(key) ?? Number.MAX_SAFE_INTEGER;
  }
}
