import { describe, expect, it } from 'vitest';
import { InflightBudget } from '../../src/backend/api/inflight-budget.js';

const limits = { perCallerRequests: 2, perCallerBytes: 100, totalBytes: 250 };

describe('InflightBudget', () => {
  it("bounds one caller's requests, and gives them back", () => {
    const b = new InflightBudget(limits);
    expect(b.take('w1', 10)).toBeNull();
    expect(b.take('w1', 10)).toBeNull();
    expect(b.take('w1', 10)).toBe('worker w1 has 2 requests in flight here (at most 2)');
    expect(b.take('w2', 10)).toBeNull();
    b.release('w1', 10);
    expect(b.take('w1', 10)).toBeNull();
    b.release('w1', 10);
    b.release('w1', 10);
    b.release('w2', 10);
    expect(b.callers).toBe(0);
  });

  it("bounds one caller's bytes, but always takes a lone request, however large", () => {
    const b = new InflightBudget({ ...limits, totalBytes: 1000 });
    expect(b.take('w1', 500)).toBeNull();
    expect(b.take('w1', 1)).toBe(
      'worker w1 has 500 bytes of requests in flight here (at most 100)',
    );
    b.release('w1', 500);
    expect(b.take('w1', 60)).toBeNull();
    expect(b.take('w1', 41)).toBe(
      'worker w1 has 60 bytes of requests in flight here (at most 100)',
    );
    expect(b.take('w1', 40)).toBeNull();
  });

  it('bounds the bytes of all callers, shared subjects included', () => {
    const b = new InflightBudget(limits);
    expect(b.take(null, 100)).toBeNull();
    expect(b.take('w1', 100)).toBeNull();
    expect(b.take('w2', 51)).toBe(
      'this backend holds 200 bytes of requests in flight (at most 250)',
    );
    expect(b.take(null, 51)).not.toBeNull();
    b.release(null, 100);
    expect(b.take(null, 51)).toBeNull();
  });
});
