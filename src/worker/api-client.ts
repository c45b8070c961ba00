import { setTimeout as delay } from 'node:timers/promises';
import { RequestError, TimeoutError, createInbox, headers } from '@nats-io/transport-node';
import type { Msg, MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { context } from '@opentelemetry/api';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import type { Names } from '../../streams/names.js';
import { inboxPrefixOf } from '../../streams/nats-internals.js';
import type { Logger } from '../log.js';
import { silentLogger } from '../log.js';
import type { ParsedRequestOf, RequestOf, Verb } from '../protocol.js';
import { TRACEPARENT, traceparentOf } from '../tracing/traceparent.js';

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

/** Options of {@link ApiClient.follow}. */
export interface FollowOptions {
  /** Each `{"progress":{...}}` the backend sends ahead of its answer. */
  onProgress?: (progress: Record<string, unknown>) => void;
  /**
   * How long the backend may go without a word (progress or answer) before the request is
   * given up as lost.
   * @defaultValue 10000
   */
  stallMs?: number;
}

/** Per-call overrides. */
export interface CallOptions {
  /** Retry for this long instead of the client's default; `Infinity` until `signal`. */
  retryForMs?: number;
  /** Stops retrying (the call rejects with the last error). */
  signal?: AbortSignal;
  /**
   * The W3C `traceparent` the request carries as a NATS header, so that the backend's span
   * for it joins the caller's trace. Absent: the active span's, if any. A header, not a body
   * field: every request schema refuses unknown fields, and older backends ignore headers.
   */
  traceparent?: string;
  /** More NATS headers for this request (the worker's batch names each request's trace). */
  headers?: Readonly<Record<string, string>>;
}

/** The request's headers, or undefined when it has none (the usual, untraced case). */
function headersOf(opts: CallOptions): MsgHdrs | undefined {
  const tp = opts.traceparent ?? traceparentOf(context.active());
  if (tp === undefined && opts.headers === undefined) return undefined;
  const h = headers();
  if (tp !== undefined) h.set(TRACEPARENT, tp);
  for (const [k, v] of Object.entries(opts.headers ?? {})) h.set(k, v);
  return h;
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
    const hdrs = headersOf(opts);
    let pause = this.backoffMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once<T>(verb, this.subject(verb), payload, hdrs);
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

  /**
   * Sends one long request (`sweep`) and follows it: the backend sends progress while it
   * works, then its answer. Not retried: it gives up when the backend goes silent for
   * `stallMs` (it stopped, or lost its connection), with `unavailable`.
   */
  async follow<V extends Verb, T = Record<string, unknown>>(
    verb: V,
    body: RequestOf<V> | ParsedRequestOf<V>,
    opts: FollowOptions = {},
  ): Promise<T> {
    const stallMs = opts.stallMs ?? 10_000;
    const sub = this.nc.subscribe(createInbox(inboxPrefixOf(this.nc)));
    let timer: NodeJS.Timeout | undefined;
    const silent = () =>
      new SonarError(
        ErrorCode.Unavailable,
        `${verb}: the backend said nothing for ${stallMs} ms; it may have stopped (asking again is safe)`,
        { verb, stallMs },
      );
    let rearm = (): void => {};
    const stalled = new Promise<never>((_resolve, reject) => {
      rearm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => reject(silent()), stallMs);
      };
      rearm();
    });
    stalled.catch(() => {});
    try {
      this.nc.publish(this.subject(verb), encoder.encode(JSON.stringify(body)), {
        reply: sub.getSubject(),
      });
      const answer = (async (): Promise<T> => {
        for await (const msg of sub) {
          rearm();
          if (isNoResponders(msg)) {
            throw new SonarError(ErrorCode.Unavailable, `${verb}: no backend is serving it`, {
              verb,
            });
          }
          const progress = progressOf(msg);
          if (progress !== null) {
            opts.onProgress?.(progress);
            continue;
          }
          return this.parse<T>(verb, msg);
        }
        throw silent();
      })();
      return await Promise.race([answer, stalled]);
    } finally {
      clearTimeout(timer);
      sub.unsubscribe();
    }
  }

  private async once<T>(
    verb: string,
    subject: string,
    payload: Uint8Array,
    hdrs: MsgHdrs | undefined,
  ): Promise<T> {
    const msg = await this.nc.request(subject, payload, {
      timeout: this.timeoutMs,
      ...(hdrs && { headers: hdrs }),
    });
    return this.parse<T>(verb, msg);
  }

  /** The `ok` payload of a reply; an error reply is thrown as {@link ApiError}. */
  private parse<T>(verb: string, msg: Msg): T {
    let reply: unknown;
    try {
      reply = JSON.parse(decoder.decode(msg.data));
    } catch {
      throw new ApiError(verb, ErrorCode.Unavailable, `${verb}: the reply is not JSON`);
    }
    return okOf<T>(verb, reply);
  }
}

/**
 * The `ok` payload of a parsed reply (a whole one, or one answer of a `batch`); an error
 * reply is thrown as {@link ApiError}.
 */
export function okOf<T>(verb: string, reply: unknown): T {
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

/** A 503 status with no body: nobody subscribes to the subject (headers-enabled clients). */
const isNoResponders = (msg: Msg): boolean => msg.data.length === 0 && msg.headers?.code === 503;

/** The body of a `{"progress":{...}}` message, or null for anything else. */
function progressOf(msg: Msg): Record<string, unknown> | null {
  try {
    const parsed = JSON.parse(decoder.decode(msg.data)) as { progress?: unknown };
    const p = parsed.progress;
    return typeof p === 'object' && p !== null ? (p as Record<string, unknown>) : null;
  } catch {
    return null;
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
