/**
 * Errors shared by every layer. actors/ is the innermost layer, so streams/ and src/ extend
 * these. The wire codes are DESIGN.md section 6 plus `overloaded` (docs/contract.md);
 * `decode`, `timeout` and `unknown` never reach the wire.
 */
export const ErrorCode = {
  Validation: 'validation',
  NotFound: 'not_found',
  StaleAttempt: 'stale_attempt',
  InvalidToken: 'invalid_token',
  IllegalTransition: 'illegal_transition',
  Conflict: 'conflict',
  /**
   * The caller may not do this: a worker acting under another worker's id, or a worker verb
   * on the shared subject where the backend requires each worker's own.
   */
  Forbidden: 'forbidden',
  Unavailable: 'unavailable',
  /**
   * The backends hold as much open work as they may (`SONAR_MAX_OPEN_TASKS`): not retried at
   * once, unlike `unavailable`; submit again once open tasks have settled.
   */
  Overloaded: 'overloaded',
  /** New work refused: the event log is near its byte bound (`SONAR_EVENTS_MAX_BYTES`). */
  StoreFull: 'store_full',
  Decode: 'decode',
  Timeout: 'timeout',
  /** A reply's code this client does not know (a newer backend's): a final failure. */
  Unknown: 'unknown',
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

/**
 * At most this many issues are listed in a message and carried in `details.issues`: a file
 * with a hundred thousand bad steps would otherwise make a reply larger than a NATS message
 * may be, and the client would see no answer at all.
 */
export const MAX_ISSUES_LISTED = 100;

/** What a zod error holds (typed by shape: this layer needs no zod import for it). */
interface IssueSource {
  issues: readonly { path: readonly PropertyKey[]; message: string }[];
}

/**
 * The one mapping of a zod error to {@link Issue}s: each path joined with dots under
 * `prefix`, `root` naming the whole value.
 */
export function issuesOf(
  error: IssueSource,
  prefix: readonly (string | number)[] = [],
  root = '(root)',
): Issue[] {
  return error.issues.map((i) => ({
    path: [...prefix, ...i.path.map((p) => String(p))].join('.') || root,
    message: i.message,
  }));
}

/** The issues as `'<path>' <problem>; ...`, the first MAX_ISSUES_LISTED, and those listed. */
export function listIssues(issues: readonly Issue[]): { text: string; listed: Issue[] } {
  const listed = issues.slice(0, MAX_ISSUES_LISTED);
  const more = issues.length - listed.length;
  const text = listed.map((i) => `'${i.path}' ${i.message}`).join('; ');
  return { text: more > 0 ? `${text}; and ${more} more` : text, listed };
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
    options?: ErrorOptions,
  ) {
    super(
      ErrorCode.IllegalTransition,
      `${machine}: ${eventType} is not accepted in state ${JSON.stringify(state)}`,
      { machine, state, eventType },
      options,
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
