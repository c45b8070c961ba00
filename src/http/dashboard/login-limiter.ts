export interface LoginLimiterOptions {
  /** Failed logins an address may make within `perMs`; the next one is refused. */
  failures: number;
  perMs: number;
  /** Addresses tracked at most; beyond it the least recent are forgotten. */
  maxAddresses: number;
  now: () => number;
}

/** 10 failed logins a minute per client address. */
export const DEFAULT_LOGIN_LIMIT = { failures: 10, perMs: 60_000, maxAddresses: 10_000 } as const;

/**
 * Failed logins per client address, over a sliding window: an address that failed
 * `failures` times within the last `perMs` is refused (429) until its oldest failure leaves
 * the window. Only failures count, and each address has its own window, so an attacker
 * guessing the token is held back while everyone else (other addresses) logs in. At most
 * `failures` times are kept per address and `maxAddresses` addresses, so memory stays
 * bounded whatever the attacker sends. Kept in memory per backend: behind a load balancer
 * an address gets this rate from each backend.
 */
export class LoginLimiter {
  /** Failure times per address, oldest first; the map is least recently failed first. */
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly opts: LoginLimiterOptions) {}

  /** How long `address` must wait before its next attempt; 0 when it may try now. */
  retryAfterMs(address: string): number {
    const times = this.recent(address);
    if (times.length < this.opts.failures) return 0;
    return Math.max(1, times[0]! + this.opts.perMs - this.opts.now());
  }

  /** Counts a failed login from `address`. */
  failed(address: string): void {
    const times = this.recent(address);
    times.push(this.opts.now());
    if (times.length > this.opts.failures) times.shift();
    this.failures.delete(address); // re-inserted last: the map stays least recent first
    this.failures.set(address, times);
    for (const oldest of this.failures.keys()) {
      if (this.failures.size <= this.opts.maxAddresses) break;
      this.failures.delete(oldest);
    }
  }

  private recent(address: string): number[] {
    const times = this.failures.get(address);
    if (times === undefined) return [];
    const since = this.opts.now() - this.opts.perMs;
    while (times.length > 0 && times[0]! <= since) times.shift();
    if (times.length === 0) this.failures.delete(address);
    return times;
  }
}
