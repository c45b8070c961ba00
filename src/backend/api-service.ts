import type { NatsConnection, Msg, Subscription } from '@nats-io/transport-node';
import type { z } from 'zod';
import {
  ErrorCode,
  SonarError,
  ValidationError,
  isSonarError,
  listIssues,
} from '../../actors/errors.js';
import type { Names } from '../../streams/names.js';
import type { Logger } from '../log.js';
import { requestSchemas } from '../protocol.js';
import { StragglerGuard } from './straggler-guard.js';
import type { ParsedRequestOf, Verb } from '../protocol.js';

export type Handler<V extends Verb> = (req: ParsedRequestOf<V>) => Promise<unknown>;
export type Handlers = { [V in Verb]?: Handler<V> };

/** Requests from all backends share one queue group: each request is answered once. */
export const API_QUEUE = 'sonar-backend';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Maps zod issues to the `'<path>' <problem>` form, every problem listed. */
export function validationErrorOf(what: string, error: z.ZodError): ValidationError {
  const issues = error.issues.map((i) => ({
    path: i.path.join('.') || '(root)',
    message: i.message,
  }));
  const { text, listed } = listIssues(issues);
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

/**
 * Serves `sonar.api.*` on NATS request/reply for any number of backends (one queue group).
 * Each request is validated against its schema in src/protocol.ts before its handler runs;
 * replies are `{"ok":{...}}` or `{"error":{"code","message","details"}}`.
 */
export class ApiService {
  private sub: Subscription | null = null;
  private inflight = new Set<Promise<void>>();
  private readonly stopping = new StragglerGuard('api');

  constructor(
    private readonly nc: NatsConnection,
    private readonly names: Names,
    private readonly handlers: Handlers,
    private readonly log: Logger,
  ) {}

  /** @throws StillStoppingError while requests of the last run are still being answered. */
  start(): void {
    if (this.sub) return;
    this.stopping.assertIdle();
    const prefix = this.names.subjects.api('');
    this.sub = this.nc.subscribe(this.names.subjects.apiAll, {
      queue: API_QUEUE,
      callback: (err, msg) => {
        if (err) {
          this.log.error('api subscription failed', { err });
          return;
        }
        const p = this.handle(msg.subject.slice(prefix.length), msg);
        this.inflight.add(p);
        void p.finally(() => this.inflight.delete(p));
      },
    });
  }

  private async handle(verb: string, msg: Msg): Promise<void> {
    let reply: unknown;
    try {
      reply = { ok: (await this.dispatch(verb, msg.data)) ?? {} };
    } catch (err: unknown) {
      if (!isSonarError(err)) this.log.error('api request failed', { verb, err });
      reply = errorReply(err);
    }
    if (!msg.reply) return;
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

  private async dispatch(verb: string, data: Uint8Array): Promise<unknown> {
    if (!Object.hasOwn(requestSchemas, verb)) {
      throw new SonarError(ErrorCode.NotFound, `unknown api verb ${JSON.stringify(verb)}`, {
        verb,
      });
    }
    const v = verb as Verb;
    // Each verb's handler takes its own schema's output: the Handlers type checks that.
    const handler = this.handlers[v] as ((req: unknown) => Promise<unknown>) | undefined;
    if (!handler) {
      throw new SonarError(ErrorCode.Unavailable, `api verb ${verb} is not served here`, { verb });
    }
    let raw: unknown;
    try {
      raw = JSON.parse(decoder.decode(data));
    } catch {
      throw new ValidationError(`${verb}: the payload is not JSON`);
    }
    const parsed = requestSchemas[v].safeParse(raw);
    if (!parsed.success) throw validationErrorOf(verb, parsed.error);
    return handler(parsed.data);
  }

  /** Stops taking requests and waits for the ones in flight. */
  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    this.sub = null;
    await this.stopping.track(Promise.allSettled([...this.inflight]));
  }
}
