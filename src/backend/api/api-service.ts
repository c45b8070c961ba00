import { ThrottledWarning } from '../../throttled-warning.js';
import type { NatsConnection, Msg, Subscription } from '@nats-io/transport-node';
import type { z } from 'zod';
import {
  ErrorCode,
  SonarError,
  ValidationError,
  isSonarError,
  issuesOf,
  listIssues,
} from '../../../actors/errors.js';
import { isStoredSubject } from '../../../streams/names.js';
import type { Names } from '../../../streams/names.js';
import type { Logger } from '../../log.js';
import { WORKER_VERBS, requestSchemas } from '../../protocol.js';
import { StragglerGuard } from '../straggler-guard.js';
import { InflightBudget } from './inflight-budget.js';
import type { InflightLimits } from './inflight-budget.js';
import type { ParsedRequestOf, Verb } from '../../protocol.js';
import { SpanKind } from '@opentelemetry/api';
import type { MsgHdrs } from '@nats-io/transport-node';
import { inSpan, passedOn, tracingInUse } from '../../tracing/tracer.js';
import {
  BATCH_TRACEPARENT_PREFIX,
  TRACEPARENT,
  contextFromTraceparent,
  traceparentOf,
} from '../../tracing/traceparent.js';

/**
 * What a handler may do besides answering: a long request (`sweep`) says how far it got, so
 * that its caller can tell a long answer from a lost one.
 */
export interface ApiCall {
  /** Sends `{"progress":{...}}` to the requester, ahead of the one answer. */
  progress(data: Record<string, unknown>): void;
  /**
   * The `traceparent` of this request's span (docs/tracing.md): what a handler records or
   * passes on (the run's trace context, a finalization job's header). Absent when neither
   * this process traces nor the request carried one.
   */
  traceparent?: string;
}

export type Handler<V extends Verb> = (req: ParsedRequestOf<V>, call: ApiCall) => Promise<unknown>;
export type Handlers = { [V in Verb]?: Handler<V> };

/** Requests from all backends share one queue group: each request is answered once. */
export const API_QUEUE = 'sonar-backend';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `w.<workerId>.<verb>` is a worker's own subject; anything else is a shared verb. */
function routeOf(rest: string): Route {
  if (!rest.startsWith('w.')) return { verb: rest, caller: null };
  const [, caller = '', ...verb] = rest.split('.');
  return { verb: verb.join('.'), caller };
}

/** A request's body as JSON, or a `validation` error naming the verb. */
export function parseJson(verb: string, data: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(data)) as unknown;
  } catch {
    throw new ValidationError(`${verb}: the payload is not JSON`);
  }
}

/** Maps zod issues to the `'<path>' <problem>` form, every problem listed. */
export function validationErrorOf(what: string, error: z.ZodError): ValidationError {
  const { text, listed } = listIssues(issuesOf(error));
  return new ValidationError(`${what}: ${text}`, listed);
}

/** The wire form of an error reply (DESIGN.md section 6). */
export function errorReply(err: unknown) {
  if (isSonarError(err)) {
    return { error: { code: err.code, message: err.message, details: err.details } };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { error: { code: ErrorCode.Unavailable, message, details: {} } };
}

/** What an {@link ApiService} allows beyond each verb's schema. */
export interface ApiServiceOptions {
  /**
   * Whether worker verbs are also served on the shared `<prefix>.api.<verb>` (older
   * workers). False in secure mode: there a worker proves who it is only by the subject it
   * may publish to, `<prefix>.api.w.<workerId>.<verb>`.
   */
  sharedWorkerVerbs: boolean;
  /** @defaultValue DEFAULT_INFLIGHT_LIMITS */
  inflightLimits?: InflightLimits;
}

/** A request's verb, and the worker the subject names when asked on a worker's own subject. */
interface Route {
  verb: string;
  caller: string | null;
}

const WORKER_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Serves `sonar.api.*` on NATS request/reply for any number of backends (one queue group).
 * Each request is validated against its schema in src/protocol.ts before its handler runs;
 * replies are `{"ok":{...}}` or `{"error":{"code","message","details"}}`.
 *
 * Worker verbs asked on `<prefix>.api.w.<workerId>.<verb>` must name that same worker in
 * their body: the subject is the caller's identity (in secure mode each worker's credential
 * may publish under its own id only), so a worker cannot act as another.
 */
export class ApiService {
  private sub: Subscription | null = null;
  private inflight = new Set<Promise<void>>();
  private readonly stopping = new StragglerGuard('api');
  private readonly budget: InflightBudget;
  /** A busy backend, or a flood of forged messages, says so every few seconds at most. */
  private readonly busy: ThrottledWarning;
  private readonly forged: ThrottledWarning;
  /** Whether requests get spans of their own (tracingInUse), settled at start. */
  private tracing = true;

  constructor(
    private readonly nc: NatsConnection,
    private readonly names: Names,
    private readonly handlers: Handlers,
    private readonly log: Logger,
    private readonly opts: ApiServiceOptions = { sharedWorkerVerbs: true },
  ) {
    this.budget = new InflightBudget(opts.inflightLimits);
    this.busy = new ThrottledWarning(log, 'api requests refused: busy', 'refused');
    this.forged = new ThrottledWarning(
      log,
      'api messages ignored: no reply subject, not a request',
      'ignored',
    );
  }

  /** @throws StillStoppingError while requests of the last run are still being answered. */
  start(): void {
    if (this.sub) return;
    this.stopping.assertIdle();
    this.tracing = tracingInUse();
    const prefix = this.names.subjects.api('');
    this.sub = this.nc.subscribe(this.names.subjects.apiAll, {
      queue: API_QUEUE,
      callback: (err, msg) => {
        if (err) {
          this.log.error('api subscription failed', { err });
          return;
        }
        if (!msg.reply || !msg.subject.startsWith(prefix)) {
          this.forged.note({ subject: msg.subject });
          return;
        }
        const route = routeOf(msg.subject.slice(prefix.length));
        const bytes = msg.data.length;
        const refusal = this.budget.take(route.caller, bytes);
        if (refusal !== null) {
          this.refuseBusy(route, msg, refusal);
          return;
        }
        const p = this.handle(route, msg);
        this.inflight.add(p);
        void p.finally(() => {
          this.inflight.delete(p);
          this.budget.release(route.caller, bytes);
        });
      },
    });
  }

  private async handle(route: Route, msg: Msg): Promise<void> {
    const { verb } = route;
    if (msg.reply && isStoredSubject(this.names, msg.reply)) {
      // NATS does not check a reply subject against the sender's permissions, and this
      // backend may publish into every stream: answering would let any caller write there.
      this.log.warn('api request refused: its reply subject is a stored one', {
        verb,
        reply: msg.reply,
      });
      return;
    }
    const call: ApiCall = {
      progress: (data) => {
        if (!msg.reply) return;
        try {
          msg.respond(encoder.encode(JSON.stringify({ progress: data })));
        } catch {
          // Only a sign of life: the answer still follows, or the request times out.
        }
      },
    };
    let reply: unknown;
    try {
      reply = { ok: (await this.dispatch(route, msg.data, call, msg.headers)) ?? {} };
    } catch (err: unknown) {
      if (!isSonarError(err)) this.log.error('api request failed', { verb, err });
      reply = errorReply(err);
    }
    try {
      msg.respond(encoder.encode(JSON.stringify(reply)));
    } catch (err: unknown) {
      // A reply over max_payload (or one that cannot be serialized) must still be answered,
      // and must never reject this promise: nobody awaits it, and an unhandled rejection
      // would end the process.
      this.log.error('api reply not sent', { verb, err });
      const message = `${verb}: the reply could not be sent (${err instanceof Error ? err.message : String(err)})`;
      try {
        msg.respond(
          encoder.encode(
            JSON.stringify(errorReply(new SonarError(ErrorCode.Unavailable, message))),
          ),
        );
      } catch {
        // The connection is gone: the client's request times out and is retried.
      }
    }
  }

  /**
   * Every caller asks with a reply subject. A message without one is not a request but the
   * server's answer to someone else's request, routed here through the workers' account's
   * import of this verb (its sender named the verb as its reply): acting on it would run a
   * verb, `exited` say, with bytes the sender chose. So it is dropped, unanswered.
   */

  /**
   * Answers a request over the budget without handling it: `unavailable`, which every worker
   * (older ones too) retries with backoff, so an honest worker's request only waits.
   */
  private refuseBusy(route: Route, msg: Msg, why: string): void {
    this.busy.note({ verb: route.verb, caller: route.caller, why });
    if (!msg.reply || isStoredSubject(this.names, msg.reply)) return;
    const err = new SonarError(ErrorCode.Unavailable, `${route.verb}: backend busy: ${why}`, {
      verb: route.verb,
    });
    try {
      msg.respond(encoder.encode(JSON.stringify(errorReply(err))));
    } catch {
      // The connection is gone: the request times out and is retried.
    }
  }

  private async dispatch(
    { verb, caller }: Route,
    data: Uint8Array,
    call: ApiCall,
    hdrs: MsgHdrs | undefined,
  ): Promise<unknown> {
    if (!Object.hasOwn(requestSchemas, verb)) {
      throw new SonarError(ErrorCode.NotFound, `unknown api verb ${JSON.stringify(verb)}`, {
        verb,
      });
    }
    const v = verb as Verb;
    if (v === 'batch') return this.batch(caller, data, call, hdrs);
    // Each verb's handler takes its own schema's output: the Handlers type checks that.
    const handler = this.handlers[v] as
      ((req: unknown, call: ApiCall) => Promise<unknown>) | undefined;
    if (!handler) {
      throw new SonarError(ErrorCode.Unavailable, `api verb ${verb} is not served here`, { verb });
    }
    return this.traced(v, caller, hdrs?.get(TRACEPARENT), call, (traced) =>
      this.dispatchParsed(v, caller, handler, parseJson(verb, data), traced),
    );
  }

  /**
   * Handles one request in its own server span, the child of the `traceparent` it carried
   * (else the root of a trace of its own). With no tracer provider the span is the API's
   * no-op one, which passes an incoming trace context on unchanged; with tracing not in use
   * at all, that is all this does, without the span.
   */
  private traced(
    verb: Verb,
    caller: string | null,
    traceparent: string | undefined,
    call: ApiCall,
    fn: (call: ApiCall) => Promise<unknown>,
  ): Promise<unknown> {
    if (!this.tracing) {
      const tp = passedOn(traceparent);
      return fn(tp === undefined ? call : { ...call, traceparent: tp });
    }
    return inSpan(
      `api ${verb}`,
      {
        kind: SpanKind.SERVER,
        parent: contextFromTraceparent(traceparent),
        attributes: {
          'sonar.api.verb': verb,
          ...(caller !== null && { 'sonar.worker_id': caller }),
        },
      },
      (_span, ctx) => {
        const tp = traceparentOf(ctx);
        return fn(tp === undefined ? call : { ...call, traceparent: tp });
      },
    );
  }

  /** A request checked against its verb's schema and its subject, then handled. */
  private dispatchParsed(
    v: Verb,
    caller: string | null,
    handler: (req: unknown, call: ApiCall) => Promise<unknown>,
    raw: unknown,
    call: ApiCall,
  ): Promise<unknown> {
    const verb = v;
    const parsed = requestSchemas[v].safeParse(raw);
    if (!parsed.success) throw validationErrorOf(verb, parsed.error);
    this.checkSubject(v, caller);
    const named = (parsed.data as { workerId?: unknown }).workerId;
    if (caller !== null && named !== caller) {
      throw new SonarError(
        ErrorCode.Forbidden,
        `${verb}: asked as worker ${caller} but names worker ${JSON.stringify(named)}: a worker acts under its own id only`,
        { verb, caller, workerId: named },
      );
    }
    return handler(parsed.data, call);
  }

  /**
   * `batch`: each request handled as if it came alone on the same subject (its own schema,
   * the same caller), all at once; the answers in order, each `{"ok"}` or `{"error"}`.
   * Every request must name the batch's worker.
   */
  private async batch(
    caller: string | null,
    data: Uint8Array,
    call: ApiCall,
    hdrs: MsgHdrs | undefined,
  ) {
    const parsed = requestSchemas.batch.safeParse(parseJson('batch', data));
    if (!parsed.success) throw validationErrorOf('batch', parsed.error);
    this.checkSubject('batch', caller);
    const { workerId, requests } = parsed.data;
    if (caller !== null && workerId !== caller) {
      throw new SonarError(
        ErrorCode.Forbidden,
        `batch: asked as worker ${caller} but names worker ${JSON.stringify(workerId)}: a worker acts under its own id only`,
        { verb: 'batch', caller, workerId },
      );
    }
    const replies = await Promise.all(
      requests.map(async ({ verb, body }, i) => {
        try {
          const handler = this.handlers[verb] as
            ((req: unknown, call: ApiCall) => Promise<unknown>) | undefined;
          if (!handler) {
            throw new SonarError(ErrorCode.Unavailable, `api verb ${verb} is not served here`, {
              verb,
            });
          }
          const named = (body as { workerId?: unknown } | null)?.workerId;
          if (named !== workerId) {
            throw new SonarError(
              ErrorCode.Forbidden,
              `${verb} in a batch of worker ${workerId} names worker ${JSON.stringify(named)}`,
              { verb, workerId, named },
            );
          }
          // Each request of a batch names its own trace: `Sonar-Traceparent-<index>`.
          const tp = hdrs?.get(`${BATCH_TRACEPARENT_PREFIX}${i}`);
          const ok = await this.traced(verb, caller, tp, call, (traced) =>
            this.dispatchParsed(verb, caller, handler, body, traced),
          );
          return { ok: ok ?? {} };
        } catch (err: unknown) {
          if (!isSonarError(err)) this.log.error('api request failed', { verb, err });
          return errorReply(err);
        }
      }),
    );
    return { replies };
  }

  /** Whether `verb` may be asked on the subject it came on. */
  private checkSubject(verb: Verb, caller: string | null): void {
    const own = this.names.subjects.workerApi('<workerId>', verb);
    if (caller !== null) {
      if (!WORKER_ID.test(caller)) {
        throw new ValidationError(
          `${verb}: the subject's worker id ${JSON.stringify(caller)} must match ${String(WORKER_ID)}`,
        );
      }
      if (!WORKER_VERBS.has(verb)) {
        throw new SonarError(
          ErrorCode.Forbidden,
          `${verb} is not a worker verb: ask it on ${this.names.subjects.api(verb)}`,
          { verb },
        );
      }
      return;
    }
    if (verb === 'renew' || (WORKER_VERBS.has(verb) && !this.opts.sharedWorkerVerbs)) {
      throw new SonarError(
        ErrorCode.Forbidden,
        `${verb}: a worker asks this on its own subject ${own}`,
        { verb },
      );
    }
  }

  /** Stops taking requests and waits for the ones in flight. */
  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    this.sub = null;
    await this.stopping.track(Promise.allSettled([...this.inflight]));
  }
}
