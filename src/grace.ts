/** Whether a promise settled in time (`done`, either way) or was left running (`timeout`). */
export type GraceOutcome = 'done' | 'timeout';

/**
 * Waits for `work` at most `ms` (0 or less: not at all, but `work` has still been started by
 * the caller). Never rejects: a stop that fails has still stopped as far as shutdown goes.
 */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<GraceOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<GraceOutcome>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), Math.max(0, ms));
  });
  const outcome = await Promise.race([
    work.then(
      (): GraceOutcome => 'done',
      (): GraceOutcome => 'done',
    ),
    timeout,
  ]);
  clearTimeout(timer);
  return outcome;
}

/** A deadline shared by a sequence of bounded waits: each gets what the ones before left. */
export class Deadline {
  private readonly at: number;

  constructor(
    ms: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.at = clock() + ms;
  }

  get remainingMs(): number {
    return Math.max(0, this.at - this.clock());
  }

  /** {@link settleWithin} the time left. */
  settle(work: Promise<unknown>): Promise<GraceOutcome> {
    return settleWithin(work, this.remainingMs);
  }
}
