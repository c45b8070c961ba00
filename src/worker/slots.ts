/**
 * A counting semaphore with FIFO waiters: the worker's `slots`. A slot is taken before a
 * message is pulled and given back once its task is reported, so the worker never holds more
 * than `slots` dispatch messages, pulled or running (DESIGN.md section 6, step 3).
 */
export class Slots {
  private free: number;
  private waiters: (() => void)[] = [];

  constructor(readonly size: number) {
    this.free = size;
  }

  /** Slots in use. */
  get used(): number {
    return this.size - this.free;
  }

  /** Resolves once a slot is taken. */
  acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Slots free now. */
  get available(): number {
    return this.free;
  }

  /** Takes up to `max` free slots now, without waiting; returns how many it took. */
  tryTake(max: number): number {
    const n = Math.max(0, Math.min(max, this.free));
    this.free -= n;
    return n;
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.free = Math.min(this.size, this.free + 1);
  }
}
