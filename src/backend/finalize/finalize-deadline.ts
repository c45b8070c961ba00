import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { formatDuration } from '../../duration.js';

/**
 * An object read or sink write of a finalization that did not settle in time. Retryable: the
 * job is naked like any failure, and poisoned once its deliveries run out, so a store or sink
 * that hangs costs a lane one deadline per delivery, never the lane itself.
 */
export class FinalizeTimeoutError extends SonarError {
  override readonly name = 'FinalizeTimeoutError';
  constructor(what: string, ms: number) {
    super(ErrorCode.Unavailable, `${what} did not settle within ${formatDuration(ms)}`, {
      timeoutMs: ms,
    });
  }
}

/**
 * Runs `work` with a signal that aborts after `ms`; then rejects with a FinalizeTimeoutError
 * whether or not `work` honours the signal (a sink may not), so the caller moves on. Work
 * that settles later is ignored.
 */
export async function withDeadline<T>(
  what: string,
  ms: number,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      const err = new FinalizeTimeoutError(what, ms);
      ac.abort(err);
      reject(err);
    }, ms);
  });
  const running = work(ac.signal);
  // The loser of the race may still reject: that is no unhandled rejection.
  running.catch(() => undefined);
  try {
    return await Promise.race([running, expired]);
  } catch (err: unknown) {
    // A failed read stops its stream too.
    if (!ac.signal.aborted) ac.abort(err);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
