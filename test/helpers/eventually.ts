import { setTimeout as delay } from 'node:timers/promises';

export interface EventuallyOptions {
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  /** Pause between attempts (default 25 ms). */
  intervalMs?: number;
  /** Prefixed to the timeout error, e.g. 'stream leader elected'. */
  message?: string;
}

/**
 * Polls `fn` until it returns without throwing; when it returns a boolean, until `true`.
 * Resolves with that value (typed without `false`). On timeout, throws an Error naming the last failure (its
 * `cause` is the last error). Modelled on nats.js `check()`: tests wait with this, never sleep.
 */
export async function eventually<T>(
  fn: () => T | Promise<T>,
  opts: EventuallyOptions = {},
): Promise<Exclude<T, false>> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 25;
  const deadline = performance.now() + timeoutMs;
  let attempts = 0;
  let lastError: unknown;
  let lastWasFalse = false;
  for (;;) {
    attempts++;
    try {
      const value = await fn();
      if (value !== false) return value as Exclude<T, false>;
      lastWasFalse = true;
      lastError = undefined;
    } catch (err: unknown) {
      lastWasFalse = false;
      lastError = err;
    }
    const remaining = deadline - performance.now();
    if (remaining <= 0) break;
    await delay(Math.min(intervalMs, remaining));
  }
  const what = opts.message ?? 'condition';
  const last = lastWasFalse
    ? 'it returned false'
    : `last error: ${lastError instanceof Error ? lastError.message : String(lastError)}`;
  throw new Error(
    `eventually: ${what} not met after ${timeoutMs} ms (${attempts} attempts); ${last}`,
    lastError === undefined ? undefined : { cause: lastError },
  );
}
