import { describe, it, expect } from 'vitest';
import { DEFAULT_RETRY_POLICY, retryDelayMs } from '../../actors/task/retry-policy.js';
import type { RetryPolicy } from '../../actors/task/retry-policy.js';

const policy = (over: Partial<RetryPolicy>): RetryPolicy => ({ ...DEFAULT_RETRY_POLICY, ...over });
const waits = (p: RetryPolicy, n: number, random = 0) =>
  Array.from({ length: n }, (_, failures) => retryDelayMs(p, failures, random));

describe('retryDelayMs', () => {
  it('defaults to what every step had: 1 s doubling per failure, capped at 5 min', () => {
    expect(waits(DEFAULT_RETRY_POLICY, 4)).toEqual([1_000, 2_000, 4_000, 8_000]);
    expect(retryDelayMs(DEFAULT_RETRY_POLICY, 8)).toBe(256_000);
    expect(retryDelayMs(DEFAULT_RETRY_POLICY, 9)).toBe(300_000);
    expect(retryDelayMs(DEFAULT_RETRY_POLICY, 1_000)).toBe(300_000);
  });

  it('exponential: initial doubling per failure, up to max and never past it', () => {
    const p = policy({ backoff: 'exponential', initialMs: 250, maxMs: 1_500 });
    expect(waits(p, 5)).toEqual([250, 500, 1_000, 1_500, 1_500]);
  });

  it('fixed: every wait is initial', () => {
    const p = policy({ backoff: 'fixed', initialMs: 5_000, maxMs: 60_000 });
    expect(waits(p, 4)).toEqual([5_000, 5_000, 5_000, 5_000]);
  });

  it('a zero initial retries at once', () => {
    expect(waits(policy({ initialMs: 0 }), 3)).toEqual([0, 0, 0]);
    expect(waits(policy({ backoff: 'fixed', initialMs: 0, maxMs: 0 }), 2)).toEqual([0, 0]);
  });

  it('jitter shortens a wait by up to its share, never lengthens it', () => {
    const p = policy({ backoff: 'fixed', initialMs: 10_000, maxMs: 10_000, jitter: 0.5 });
    expect(retryDelayMs(p, 0, 0)).toBe(10_000);
    expect(retryDelayMs(p, 0, 0.5)).toBe(7_500);
    expect(retryDelayMs(p, 0, 0.999_999)).toBe(5_000);
    const full = policy({ initialMs: 1_000, maxMs: 8_000, jitter: 1 });
    expect(waits(full, 5, 0.25)).toEqual([750, 1_500, 3_000, 6_000, 6_000]);
  });

  it('without jitter the random number is not read', () => {
    expect(retryDelayMs(DEFAULT_RETRY_POLICY, 2, 0.9)).toBe(4_000);
  });
});
