import { setTimeout as delay } from 'node:timers/promises';
import { RequestError, TimeoutError } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import type { Names } from '../../streams/names.js';
import type { Logger } from '../log.js';
import { silentLogger } from '../log.js';
import type { ParsedRequestOf, RequestOf, Verb } from '../protocol.js';

/** An error answer from the backend: `{"error":{"code","message","details"}}`. */
export class ApiError extends SonarError {
  override readonly name = 'ApiError';
  constructor(
    readonly verb: string,
    code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
  ) {
    super(code, message, details);
  }
}

export const isApiError = (e: unknown, code?: ErrorCode): e is ApiError =>
  e instanceof ApiError && (code === undefined || e.code === code);

/** Options of {@link ApiClient}. */
export interface ApiClientOptions {
  /**
   * How long one request waits for its reply.
   * @defaultValue 5000 (DESIGN.md section 6)
   */
  timeoutMs?: number;
  /**
   * How long a request is retried (timeouts, no responders, `unavailable`) before it fails.
   * @defaultValue 30000
   */
  retryForMs?: number;
  /**
   * First pause between retries; it doubles up to {@link ApiClientOptions.maxBackoffMs}.
   * @defaultValue 100
   */
  backoffMs?: number;
  /**
   * @defaultValue 2000
   */
  maxBackoffMs?: number;
  log?: Logger;
  /**
   * The subject of each verb. Default: the shared `<prefix>.api.<verb>`; a worker asks its
   * own verbs on `<prefix>.api.w.<workerId>.<verb>`.
   */
  subject?: (verb: Verb) => string;
}

/** Per-call overrides. */
export interface CallOptions {
  /** Retry for this long instead of the client's default; `Infinity` until `signal`. */
  retryForMs?: number;
  /** Stops retrying (the call rejects with the last error). */
  signal?: AbortSignal;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Failures worth a retry: nobody answered, or the answer said to try again. */
function isTransient(err: unknown): boolean {
  if (err instanceof TimeoutError) return true;
  if (err instanceof RequestError) return true; // no responders, or disconnected
  return isApiError(err, ErrorCode.Unavailable);
}

/**
 * The client side of `sonar.api.*` (DESIGN.md section 6), for workers and clients alike.
 * Each request is idempotent on the backend, so a timeout, no responders or `unavailable` is
 * retried with backoff; any other error answer is final and thrown as {@link ApiError}.
 */
export class ApiClient {
  private readonly timeoutMs: number;
  private readonly retryForMs: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly log: Logger;
  private readonly subject: (verb: Verb) => string;

  constructor(
    private readonly nc: NatsConnection,
    private readonly names: Names,
    opts: ApiClientOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? 5_000;
    this.retryForMs = opts.retryForMs ?? 30_000;
    this.backoffMs = opts.backoffMs ?? 100;
    this.maxBackoffMs = opts.maxBackoffMs ?? 2_000;
    this.log = opts.log ?? silentLogger;
    this.subject = opts.subject ?? ((verb) => names.subjects.api(verb));
  }

  /** Sends one request; resolves with the `ok` payload. */
  async request<V extends Verb, T = Record<string, unknown>>(
    verb: V,
    body: RequestOf<V> | ParsedRequestOf<V>,
    opts: CallOptions = {},
  ): Promise<T> {
    const deadline = performance.now() + (opts.retryForMs ?? this.retryForMs);
    const payload = encoder.encode(JSON.stringify(body));
    let pause = this.backoffMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once<T>(verb, this.subject(verb), payload);
      } catch (err: unknown) {
        const left = deadline - performance.now();
        if (!isTransient(err) || opts.signal?.aborted || left <= 0) {
          throw isApiError(err) || !isTransient(err) ? err : unanswered(verb, attempt, err);
        }
        this.log.debug('api request retried', { verb, attempt, err });
        await delay(Math.min(pause, left), undefined, { signal: opts.signal }).catch(() => {});
        pause = Math.min(pause * 2, this.maxBackoffMs);
      }
    }
  }

  private async once<T>(verb: string, subject: string, payload: Uint8Array): Promise<T> {
    const msg = await this.nc.request(subject, payload, {
      timeout: this.timeoutMs,
    });
    let reply: unknown;
    try {
      reply = JSON.parse(decoder.decode(msg.data));
    } catch {
      throw new ApiError(verb, ErrorCode.Unavailable, `${verb}: the reply is not JSON`);
    }
    const r = reply as {
      ok?: unknown;
      error?: { code?: unknown; message?: unknown; details?: unknown };
    };
    if (r.error !== undefined) {
      const given = typeof r.error.code === 'string' ? r.error.code : '';
      // A code this client does not know (a newer backend's) is a final failure, never
      // retried: only `unavailable` says that trying again soon may help.
      const known = (Object.values(ErrorCode) as string[]).includes(given);
      const code = known ? (given as ErrorCode) : ErrorCode.Unknown;
      const details =
        typeof r.error.details === 'object' && r.error.details !== null
          ? (r.error.details as Record<string, unknown>)
          : {};
      if (!known) details['code'] = given;
      const message = typeof r.error.message === 'string' ? r.error.message : code;
      throw new ApiError(verb, code, message, details);
    }
    return (r.ok ?? {}) as T;
  }
}

function unanswered(verb: string, attempts: number, cause: unknown): SonarError {
  const why = cause instanceof Error ? cause.message : String(cause);
  return new SonarError(
    ErrorCode.Unavailable,
    `no answer from the backend to ${verb} after ${attempts} attempt(s): ${why}`,
    { verb, attempts },
    { cause },
  );
}
