/**
 * Errors shared by every layer. actors/ is the innermost layer, so streams/ and src/ extend
 * these. The wire codes are DESIGN.md section 6; `decode` and `timeout` never reach the wire.
 */
export const ErrorCode = {
  Validation: 'validation',
  NotFound: 'not_found',
  StaleAttempt: 'stale_attempt',
  InvalidToken: 'invalid_token',
  IllegalTransition: 'illegal_transition',
  Conflict: 'conflict',
  Unavailable: 'unavailable',
  StoreFull: 'store_full', // new work refused: the event log is near its byte bound
  Decode: 'decode',
  Timeout: 'timeout',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class SonarError extends Error {
  override readonly name: string = 'SonarError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** One problem with an input, in the nats.js form `'<path>' <problem>`. */
export interface Issue {
  path: string;
  message: string;
}

export class ValidationError extends SonarError {
  override readonly name = 'ValidationError';
  constructor(
    message: string,
    readonly issues: Issue[] = [],
  ) {
    super(ErrorCode.Validation, message, { issues });
  }
}

export class IllegalTransitionError extends SonarError {
  override readonly name = 'IllegalTransitionError';
  constructor(
    readonly machine: string,
    readonly state: unknown,
    readonly eventType: string,
  ) {
    super(
      ErrorCode.IllegalTransition,
      `${machine}: ${eventType} is not accepted in state ${JSON.stringify(state)}`,
      { machine, state, eventType },
    );
  }
}

export class DecodeError extends SonarError {
  override readonly name = 'DecodeError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Decode, message, {}, options);
  }
}

export const isSonarError = (e: unknown, code?: ErrorCode): e is SonarError =>
  e instanceof SonarError && (code === undefined || e.code === code);
