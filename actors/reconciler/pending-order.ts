import type { StepIndex } from '../projection.js';

/**
 * Some of a step's Pending tasks in creation (`TaskCreated`) order, read one at a time, so that
 * a tick reads only as far as it places. It merges sources that are each already in creation
 * order (a priority's lane of never-published tasks, its due timed tasks) with the tasks back
 * from an attempt (the few in `returned`, plus those requeued in this very tick), which are
 * sorted by creation order first. Keys are told apart by the step's `order`, so no two tie.
 */
export class PendingOrder {
  private readonly sources: Iterator<string>[] = [];
  private readonly heads: string[] = [];
  private readonly ranks: number[] = [];

  constructor(
    private readonly index: StepIndex,
    fresh: readonly Iterable<string>[],
    back: readonly string[] = [],
  ) {
    const sortedBack =
      back.length === 0 ? back : [...back].sort((a, b) => this.orderOf(a) - this.orderOf(b));
    for (const source of [sortedBack, ...fresh]) this.open(source[Symbol.iterator]());
  }

  /** The task `next()` would give, without taking it. */
  peek(): string | undefined {
    const s = this.first();
    return s === -1 ? undefined : this.heads[s];
  }

  /** The next Pending task key, or undefined when there is none left. */
  next(): string | undefined {
    const s = this.first();
    if (s === -1) return undefined;
    const key = this.heads[s];
    const r = this.sources[s]!.next();
    if (r.done) {
      this.sources.splice(s, 1);
      this.heads.splice(s, 1);
      this.ranks.splice(s, 1);
    } else {
      this.heads[s] = r.value;
      this.ranks[s] = this.orderOf(r.value);
    }
    return key;
  }

  private open(source: Iterator<string>): void {
    const r = source.next();
    if (r.done) return;
    this.sources.push(source);
    this.heads.push(r.value);
    this.ranks.push(this.orderOf(r.value));
  }

  /** The source whose head comes first (a handful of sources at most: a linear pick). */
  private first(): number {
    let best = -1;
    for (let s = 0; s < this.ranks.length; s++) {
      if (best === -1 || this.ranks[s]! < this.ranks[best]!) best = s;
    }
    return best;
  }

  private orderOf(key: string): number {
    return this.index.order.get(key) ?? Number.MAX_SAFE_INTEGER;
  }
}
