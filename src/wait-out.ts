import { setTimeout as delay } from 'node:timers/promises';

/** The first pause between tries, doubled each time up to {@link WAIT_OUT_MAX_MS}. */
export const WAIT_OUT_FIRST_MS = 500;
export const WAIT_OUT_MAX_MS = 5_000;

export interface WaitOutOptions {
  /** Whether `err` is a condition to wait out; any other error is thrown at once. */
  isWait: (err: unknown) => boolean;
  /** Said before each pause, to tell the operator what is awaited. */
  onWait: (err: unknown, attempt: number, retryInMs: number) => void;
  /** Stops the wait: the last error is thrown. */
  signal?: AbortSignal;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/**
 * Runs `run` until it succeeds, pausing 0.5 s doubling to 5 s after each failure that
 * `isWait` accepts, without end (or until `signal`). For conditions another process mends (a
 * server coming back, a cluster forming): a process that exited instead would only be
 * restarted into the same wait by its supervisor, with less said about why.
 */
export async function waitOut<T>(run: () => Promise<T>, opts: WaitOutOptions): Promise<T> {
  const sleep =
    opts.sleep ?? ((ms, signal) => delay(ms, undefined, { signal }).catch(() => undefined));
  let pauseMs = WAIT_OUT_FIRST_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err: unknown) {
      if (!opts.isWait(err) || opts.signal?.aborted) throw err;
      opts.onWait(err, attempt, pauseMs);
      await sleep(pauseMs, opts.signal);
      if (opts.signal?.aborted) throw err;
      pauseMs = Math.min(pauseMs * 2, WAIT_OUT_MAX_MS);
    }
  }
}
