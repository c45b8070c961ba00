import { describe, expect, it } from 'vitest';
import { finalizeDelayMs } from '../../src/backend/finalize/finalize-backoff.js';
import { resolveFinalizerPoolOptions } from '../../src/backend/finalize/finalizer-pool.js';

describe('finalizeDelayMs', () => {
  it('is 1 s after the first delivery, doubling, capped at 60 s (DESIGN.md section 7)', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((d) => finalizeDelayMs(d))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000,
    ]);
  });

  it('takes the base and cap as options and never overflows', () => {
    expect(finalizeDelayMs(3, 250, 800)).toBe(800);
    expect(finalizeDelayMs(2, 250, 800)).toBe(500);
    expect(finalizeDelayMs(10_000)).toBe(60_000);
    expect(finalizeDelayMs(0)).toBe(1_000);
  });
});

describe('resolveFinalizerPoolOptions', () => {
  it('defaults to the DESIGN values and the configured pool size', () => {
    expect(resolveFinalizerPoolOptions({}, { size: 4 })).toEqual({
      size: 4,
      backoffBaseMs: 1_000,
      backoffCapMs: 60_000,
      renewIntervalMs: null,
      ioTimeoutMs: null,
      pullExpiresMs: 5_000,
      watchAdvisories: true,
    });
  });

  it('parses durations and refuses a pool of 0', () => {
    expect(
      resolveFinalizerPoolOptions({ backoffBase: '250ms', backoffCap: '5s' }, { size: 2 }),
    ).toMatchObject({
      backoffBaseMs: 250,
      backoffCapMs: 5_000,
    });
    expect(() => resolveFinalizerPoolOptions({ size: 0 }, { size: 4 })).toThrow(/'size' must be/);
  });
});
