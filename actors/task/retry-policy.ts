/**
 * How long a task waits after a retryable failure before it may be placed again: a step's
 * `retry` policy (docs/run-file.md), resolved to milliseconds. Pure: the jitter's random
 * number is an input, drawn by the backend, and the resulting `retryAt` is recorded in
 * `TaskAttemptFailed`, so that replay never draws again.
 */
export interface RetryPolicy {
  /** `fixed`: every wait is `initialMs`; `exponential`: `initialMs` doubling per failure. */
  backoff: 'fixed' | 'exponential';
  initialMs: number;
  /** No wait is longer. */
  maxMs: number;
  /**
   * 0 to 1: the share of each wait that is random. A wait of `d` becomes a uniform draw in
   * `[d x (1 - jitter), d]`: jitter only shortens, so `maxMs` stays a bound.
   */
  jitter: number;
}

/** A step's `retry` as `StepCreated` records it: the policy and the attempts of its tasks. */
export interface StepRetry extends RetryPolicy {
  /** For its tasks without a `maxAttempts` of their own. */
  maxAttempts: number;
}

/** What a step without `retry` gets: 1 s doubling per failure, capped at 5 min, no jitter. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = {
  backoff: 'exponential',
  initialMs: 1_000,
  maxMs: 5 * 60_000,
  jitter: 0,
};

/** A task's attempts (`TaskAttemptFailed`s) when neither it nor its step says. */
export const DEFAULT_MAX_ATTEMPTS = 3;

/**
 * The wait after a failure, when `failuresSoFar` failures came before it (0 for the first).
 * @param random - uniform in [0, 1); only read when the policy has jitter.
 */
export function retryDelayMs(policy: RetryPolicy, failuresSoFar: number, random = 0): number {
  const base =
    policy.backoff === 'fixed'
      ? policy.initialMs
      : policy.initialMs * 2 ** Math.min(Math.max(0, failuresSoFar), 30);
  const capped = Math.min(policy.maxMs, base);
  return Math.round(capped * (1 - policy.jitter * random));
}
