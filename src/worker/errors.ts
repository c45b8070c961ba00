import { ErrorCode, SonarError } from '../../actors/errors.js';

/**
 * Thrown by a task handler to fail the task at once, without retries: `fail` is sent with
 * `retryable: false` (BullMQ's `UnrecoverableError`). Any other error is a retryable failure.
 */
export class NonRetryableError extends Error {
  override readonly name = 'NonRetryableError';
}

export const isNonRetryableError = (e: unknown): e is NonRetryableError =>
  e instanceof NonRetryableError;

/** A Worker method called in a lifecycle state that does not allow it. */
export class IllegalStateError extends SonarError {
  override readonly name = 'IllegalStateError';
  constructor(
    readonly state: string,
    readonly operation: string,
  ) {
    super(ErrorCode.IllegalTransition, `worker: cannot ${operation} while ${state}`, {
      state,
      operation,
    });
  }
}

export const isIllegalStateError = (e: unknown): e is IllegalStateError =>
  e instanceof IllegalStateError;

/**
 * A command that ended badly: a non-zero exit (retryable, with its code and the tail of its
 * stderr), or one that could not run at all (`exitCode` -1).
 */
export class CommandFailedError extends Error {
  override readonly name = 'CommandFailedError';
  constructor(
    message: string,
    readonly exitCode: number,
    readonly retryable = true,
  ) {
    super(message);
  }
}
