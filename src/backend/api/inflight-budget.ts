/** How much one backend answers at once, per caller and in all. */
export interface InflightLimits {
  /** Requests of one worker (its own subject) being handled at once. */
  perCallerRequests: number;
  /** Payload bytes of one worker's requests being handled at once. */
  perCallerBytes: number;
  /** Payload bytes of all requests being handled at once. */
  totalBytes: number;
}

/**
 * Enough for an honest worker of the largest size (its starts and results batched, one
 * progress and one log chunk in flight per task) and small enough that a worker sending as
 * fast as it can holds no more than 16 MiB of this backend's memory.
 */
export const DEFAULT_INFLIGHT_LIMITS: Readonly<InflightLimits> = {
  perCallerRequests: 1024,
  perCallerBytes: 16 * 1024 * 1024,
  totalBytes: 256 * 1024 * 1024,
};

interface Held {
  requests: number;
  bytes: number;
}

/**
 * The requests a backend is handling, counted per caller and in all, so that no caller (a
 * compromised worker flooding its own subject) can make it hold unbounded work: NATS hands
 * every request to the callback at once, and each handler holds its payload until it
 * answers. A request over the budget is answered at once instead of handled.
 */
export class InflightBudget {
  private readonly byCaller = new Map<string, Held>();
  private totalBytes = 0;

  constructor(private readonly limits: InflightLimits = DEFAULT_INFLIGHT_LIMITS) {}

  /**
   * Takes `bytes` for `caller` (null: a shared subject, bounded only in all), or says why not.
   * @returns null when taken (give it back with {@link release}), else the refusal's reason.
   */
  take(caller: string | null, bytes: number): string | null {
    const { limits } = this;
    if (this.totalBytes + bytes > limits.totalBytes && this.totalBytes > 0) {
      return `this backend holds ${this.totalBytes} bytes of requests in flight (at most ${limits.totalBytes})`;
    }
    if (caller !== null) {
      const held = this.byCaller.get(caller) ?? { requests: 0, bytes: 0 };
      if (held.requests >= limits.perCallerRequests) {
        return `worker ${caller} has ${held.requests} requests in flight here (at most ${limits.perCallerRequests})`;
      }
      if (held.bytes + bytes > limits.perCallerBytes && held.bytes > 0) {
        return `worker ${caller} has ${held.bytes} bytes of requests in flight here (at most ${limits.perCallerBytes})`;
      }
      held.requests++;
      held.bytes += bytes;
      this.byCaller.set(caller, held);
    }
    this.totalBytes += bytes;
    return null;
  }

  release(caller: string | null, bytes: number): void {
    this.totalBytes -= bytes;
    if (caller === null) return;
    const held = this.byCaller.get(caller);
    if (!held) return;
    held.requests--;
    held.bytes -= bytes;
    if (held.requests <= 0) this.byCaller.delete(caller);
  }

  /** Callers holding anything now (tests). */
  get callers(): number {
    return this.byCaller.size;
  }
}
