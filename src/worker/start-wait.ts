import { RequestError, TimeoutError } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import type { Logger } from '../log.js';
import { waitOut } from '../wait-out.js';
import type { WaitOutOptions } from '../wait-out.js';

/**
 * Whether `err` says that nothing answered (yet), rather than that something refused: a
 * request timed out, found no responders or was cut by a disconnect, JetStream had not come
 * up (nats.js reports no responders on its API as "not enabled"), or the backend said
 * `unavailable` after every retry.
 */
export function isUnanswered(err: unknown): boolean {
  if (err instanceof TimeoutError || err instanceof RequestError) return true;
  // An account without JetStream is refused with an API error; only no responders is a wait.
  // (nats.js's JetStreamNotEnabled, known by name: the package's entry point does not export it.)
  if (err instanceof Error && err.name === 'JetStreamNotEnabled') {
    return err.cause instanceof RequestError;
  }
  return err instanceof SonarError && err.code === ErrorCode.Unavailable;
}

export interface StartWaitOptions {
  log: Logger;
  /** Stops the wait (the worker stops): the last error is thrown. */
  signal: AbortSignal;
  sleep?: WaitOutOptions['sleep'];
}

/**
 * Runs one step of a worker's start (enroll, join, opening its bucket, its first pulse,
 * finding its consumers) until it is answered. A worker whose start an outage cuts waits for
 * the server and the backend as a running worker does, saying so on every try, instead of
 * exiting into its supervisor's restart loop. A refusal (any other error) is thrown at once.
 */
export function untilAnswered<T>(
  step: string,
  run: () => Promise<T>,
  opts: StartWaitOptions,
): Promise<T> {
  return waitOut(run, {
    isWait: isUnanswered,
    onWait: (err, attempt, retryInMs) =>
      opts.log.warn('not answered while starting; waiting for NATS and the backend', {
        step,
        attempt,
        retryInMs,
        error: err instanceof Error ? err.message : String(err),
      }),
    signal: opts.signal,
    ...(opts.sleep && { sleep: opts.sleep }),
  });
}
