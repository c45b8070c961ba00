import { describe, expect, it } from 'vitest';
import { RENEW_CUT_GUARD_MS, renewalTime } from '../../src/worker/credential.js';

describe('renewalTime', () => {
  it('is half the remaining life when the cut is far from it', () => {
    expect(renewalTime(0, 4_000, 10_000)).toBe(2_000);
    expect(renewalTime(0, 4_000, Infinity)).toBe(2_000);
  });

  it('goes before the cut when half the life would meet it', () => {
    // Opened at 0 with a JWT to 4 s, renewed at 2 s to 6 s: half of what is left is 4 s, the cut.
    expect(renewalTime(2_000, 6_000, 4_000)).toBe(4_000 - RENEW_CUT_GUARD_MS);
    expect(renewalTime(2_000, 6_000, 4_500)).toBe(4_500 - RENEW_CUT_GUARD_MS);
  });

  it('goes after the cut when there is no time before it, and never past the expiry', () => {
    expect(renewalTime(3_500, 5_600, 4_000)).toBe(4_000 + RENEW_CUT_GUARD_MS);
    // No time before the cut, and the expiry comes before the guard after it: half, as ever.
    expect(renewalTime(3_500, 4_600, 4_000)).toBe(4_050);
  });

  it('with a one-hour credential, never renews within the guard of a cut', () => {
    const ttl = 3_600_000;
    let now = 0;
    let expiresAt = ttl;
    let cutAt = ttl; // the connection was opened with the first JWT
    for (let i = 0; i < 20; i++) {
      const at = renewalTime(now, expiresAt, cutAt);
      expect(Math.abs(at - cutAt)).toBeGreaterThanOrEqual(RENEW_CUT_GUARD_MS);
      expect(at).toBeGreaterThan(now);
      expect(at).toBeLessThan(expiresAt);
      // The reconnect at each cut presents the JWT renewed last.
      const renewedExpiry = at + ttl;
      if (at > cutAt) cutAt = expiresAt;
      now = at;
      expiresAt = renewedExpiry;
    }
  });
});
