/** DESIGN.md section 7: a failed finalization is retried after 1 s, doubling, capped at 60 s. */
export const FINALIZE_BACKOFF_BASE_MS = 1_000;
export const FINALIZE_BACKOFF_CAP_MS = 60_000;

/**
 * The `nak(delay)` after the `deliveryCount`-th delivery failed: base, 2 x base, 4 x base...,
 * at most `capMs`. The consumer has no `backoff` field (on 2.9 it would overwrite ack_wait),
 * so the finalizer computes each delay itself from the server's delivery count.
 */
export function finalizeDelayMs(
  deliveryCount: number,
  baseMs = FINALIZE_BACKOFF_BASE_MS,
  capMs = FINALIZE_BACKOFF_CAP_MS,
): number {
  const exponent = Math.max(0, deliveryCount - 1);
  // 2 ** 31 x base is already far past any cap: stop there rather than overflow to Infinity.
  return Math.min(capMs, baseMs * 2 ** Math.min(exponent, 31));
}
