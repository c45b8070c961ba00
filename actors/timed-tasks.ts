/**
 * A step's never-published Pending tasks that have a `notBefore` of their own (the StepIndex's
 * `timed`), kept so that a tick never passes over the ones still to come one by one: per
 * priority in creation order, with the earliest time of every range of them at hand (a
 * minimum tree), so that the next due task after a position is a walk down the tree; and all
 * their times in order, so that the not-yet-due are counted by position.
 *
 * A task is due at `now` when its time is at or before it. A time that does not parse counts
 * as due at once, as it always has (NaN is never after `now`).
 *
 * Only the fold changes it (`add` at TaskCreated, `delete` when the task leaves Pending); the
 * planner only reads it, so a tick leaves the projection as it found it.
 */
export class TimedTasks {
  private readonly lanes = new Map<number | undefined, TimedLane>();
  private readonly times = new SortedTimes();

  /** How many tasks it holds. */
  get size(): number {
    return this.times.size;
  }

  /**
   * Files a task at its own priority (undefined: its step's) and time (ms). Tasks of one
   * priority must come in creation order, as TaskCreated brings them.
   */
  add(key: string, priority: number | undefined, at: number): void {
    const time = Number.isNaN(at) ? -Infinity : at;
    let lane = this.lanes.get(priority);
    if (!lane) this.lanes.set(priority, (lane = new TimedLane()));
    lane.add(key, time);
    this.times.add(time);
  }

  /** Takes a task out (it left Pending); false when it is not here. */
  delete(key: string, priority: number | undefined): boolean {
    const lane = this.lanes.get(priority);
    const time = lane?.delete(key);
    if (time === undefined) return false;
    if (lane!.size === 0) this.lanes.delete(priority);
    this.times.delete(time);
    return true;
  }

  /** How many are not due yet at `now` (their time is after it). */
  notYetDue(now: number): number {
    return this.times.countAbove(now);
  }

  /** The priorities it holds tasks of (undefined: their step's). */
  priorities(): IterableIterator<number | undefined> {
    return this.lanes.keys();
  }

  /** The tasks of one priority due at `now`, in creation order, found as they are read. */
  due(priority: number | undefined, now: number): Iterable<string> {
    return this.lanes.get(priority)?.due(now) ?? [];
  }

  /**
   * Every task as `[key, priority, time]`: priorities ascending (the step's first), each in
   * creation order. The same for a folded and a restored index, for tests and dumps.
   */
  entries(): [string, number | undefined, number][] {
    // Sorted as pairs: Array sort puts undefined elements last without asking the comparator.
    const lanes = [...this.lanes].sort(([a], [b]) => (a ?? -Infinity) - (b ?? -Infinity));
    return lanes.flatMap(([priority, lane]) =>
      lane.entries().map(([key, at]): [string, number | undefined, number] => [key, priority, at]),
    );
  }
}

/**
 * One priority's tasks in creation order: an array that only grows at its end, with a gap left
 * where a task leaves (time +Infinity: never due), under a tree whose every node holds the
 * earliest time below it. Gaps are swept out once they are most of it, so its size stays
 * within a constant of the tasks it holds.
 */
class TimedLane {
  private keys: (string | undefined)[] = [];
  private times: number[] = [];
  /** Node n covers nodes 2n and 2n+1; leaves at [cap, 2 cap); unused leaves are +Infinity. */
  private tree = new Float64Array(2).fill(Infinity);
  private cap = 1;
  private readonly at = new Map<string, number>();

  get size(): number {
    return this.at.size;
  }

  add(key: string, time: number): void {
    if (this.keys.length === this.cap) this.rebuild();
    const i = this.keys.length;
    this.keys.push(key);
    this.times.push(time);
    this.at.set(key, i);
    this.set(i, time);
  }

  /** Takes `key` out; its time, or undefined when it is not here. */
  delete(key: string): number | undefined {
    const i = this.at.get(key);
    if (i === undefined) return undefined;
    const time = this.times[i]!;
    this.at.delete(key);
    this.keys[i] = undefined;
    this.times[i] = Infinity;
    this.set(i, Infinity);
    if (this.keys.length > 64 && this.at.size < this.keys.length / 4) this.rebuild();
    return time;
  }

  *due(now: number): Generator<string, void, undefined> {
    for (let i = this.nextDue(0, now); i !== -1; i = this.nextDue(i + 1, now)) {
      yield this.keys[i]!;
    }
  }

  entries(): [string, number][] {
    const out: [string, number][] = [];
    this.keys.forEach((key, i) => {
      if (key !== undefined) out.push([key, this.times[i]!]);
    });
    return out;
  }

  /** The first position at or after `from` whose time is at or before `now`; -1 if none. */
  private nextDue(from: number, now: number): number {
    if (from >= this.keys.length) return -1;
    const tree = this.tree;
    let n = this.cap + from;
    if (tree[n]! <= now) return from;
    // Up to the nearest subtree on the right holding a due time, then down to its first one.
    for (;;) {
      while (n & 1) n >>= 1;
      if (n === 0) return -1;
      n++;
      if (tree[n]! <= now) break;
    }
    while (n < this.cap) n = tree[2 * n]! <= now ? 2 * n : 2 * n + 1;
    return n - this.cap;
  }

  private set(i: number, time: number): void {
    const tree = this.tree;
    let n = this.cap + i;
    tree[n] = time;
    for (n >>= 1; n >= 1; n >>= 1) tree[n] = Math.min(tree[2 * n]!, tree[2 * n + 1]!);
  }

  /** Sweeps the gaps out and leaves room for as many tasks again as it holds. */
  private rebuild(): void {
    const keys: string[] = [];
    const times: number[] = [];
    this.keys.forEach((key, i) => {
      if (key === undefined) return;
      keys.push(key);
      times.push(this.times[i]!);
    });
    let cap = 1;
    while (cap < 2 * keys.length) cap *= 2;
    const tree = new Float64Array(2 * cap).fill(Infinity);
    this.at.clear();
    keys.forEach((key, i) => {
      tree[cap + i] = times[i]!;
      this.at.set(key, i);
    });
    for (let n = cap - 1; n >= 1; n--) tree[n] = Math.min(tree[2 * n]!, tree[2 * n + 1]!);
    this.keys = keys;
    this.times = times;
    this.tree = tree;
    this.cap = cap;
  }
}

/** Chunks of at most twice this many times: an insert moves at most a chunk. */
const CHUNK = 512;

/**
 * A multiset of times in ascending order, as sorted chunks: add and delete cost a binary search
 * and a move within one chunk; counting those after a time costs a walk over the chunks after
 * it (a few hundred at most for a step of 100k timed tasks), never over the times.
 */
class SortedTimes {
  private readonly chunks: number[][] = [];
  size = 0;

  add(time: number): void {
    this.size++;
    if (this.chunks.length === 0) {
      this.chunks.push([time]);
      return;
    }
    const c = Math.min(this.chunkFor(time), this.chunks.length - 1);
    const chunk = this.chunks[c]!;
    chunk.splice(firstAbove(chunk, time), 0, time);
    if (chunk.length > 2 * CHUNK) this.chunks.splice(c + 1, 0, chunk.splice(CHUNK));
  }

  delete(time: number): void {
    const c = this.chunkFor(time);
    const chunk = this.chunks[c];
    if (!chunk) return;
    const i = firstAtOrAbove(chunk, time);
    if (chunk[i] !== time) return;
    this.size--;
    chunk.splice(i, 1);
    if (chunk.length === 0) this.chunks.splice(c, 1);
  }

  /** How many times are after `time`. */
  countAbove(time: number): number {
    let n = 0;
    for (let c = this.chunks.length - 1; c >= 0; c--) {
      const chunk = this.chunks[c]!;
      if (chunk[0]! > time) {
        n += chunk.length;
        continue;
      }
      return n + chunk.length - firstAbove(chunk, time);
    }
    return n;
  }

  /** The first chunk whose last time is at or after `time` (chunks.length when none is). */
  private chunkFor(time: number): number {
    let lo = 0;
    let hi = this.chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const chunk = this.chunks[mid]!;
      if (chunk[chunk.length - 1]! < time) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** The first position in ascending `xs` whose value is after `x`. */
function firstAbove(xs: readonly number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first position in ascending `xs` whose value is at or after `x`. */
function firstAtOrAbove(xs: readonly number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
