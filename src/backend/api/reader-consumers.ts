/**
 * Serves readers' consumer creates (`<prefix>.reader.consumer.<stream>[.<name>[.<filter>]]`,
 * imported by the readers' account as `CONSUMER.CREATE` under its API prefix): checks each
 * (reader-consumer-check.ts), refuses a name already in use, and sends JetStream the create
 * as checked (rebuilt, never the bytes as they came), answering with JetStream's own answer,
 * so nats.js on the reader's side sees an ordinary create. Every backend serves it, in one
 * queue group. The name check and the create are two steps: a create with the same name
 * landing between them (on another backend) would change that consumer; nats.js names its
 * consumers with random ids, which another reader would have to guess.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from '../../log.js';
import type { Names } from '../../../streams/names.js';
import { isStoredSubject } from '../../../streams/names.js';
import { READER_ROLES, roleInboxPrefix } from '../../auth/permissions.js';
import { ThrottledWarning } from '../../throttled-warning.js';
import { checkReaderConsumer, isRefusal } from './reader-consumer-check.js';

const QUEUE = 'sonar-reader-consumers';
const CREATE_TIMEOUT_MS = 5_000;

const encoder = new TextEncoder();

/** JetStream's answer shape, so nats.js shows the refusal as a JetStream API error. */
function refusal(description: string): Uint8Array {
  return encoder.encode(
    JSON.stringify({
      type: 'io.nats.jetstream.api.v1.consumer_create_response',
      error: { code: 403, err_code: 10999, description: `sonar: ${description}` },
    }),
  );
}

export class ReaderConsumers {
  private sub: Subscription | null = null;
  private jsm: Promise<JetStreamManager> | null = null;
  private readonly inflight = new Set<Promise<void>>();
  private readonly inboxes = READER_ROLES.map(roleInboxPrefix);
  private readonly ignored: ThrottledWarning;

  constructor(
    private readonly nc: NatsConnection,
    private readonly names: Names,
    private readonly log: Logger,
  ) {
    this.ignored = new ThrottledWarning(
      log,
      'reader consumer messages ignored: not a request',
      'ignored',
    );
  }

  start(): void {
    if (this.sub) return;
    const prefix = `${this.names.subjects.readerConsumerCreate}.`;
    this.sub = this.nc.subscribe(`${prefix}>`, {
      queue: QUEUE,
      callback: (err, msg) => {
        if (err) {
          this.log.error('reader consumer subscription failed', { err });
          return;
        }
        // No reply: an answer someone aimed here, not a request (as in api-service.ts); nor
        // is a JetStream delivery aimed here, which shows its stream's subject. A stored
        // reply: an answer that would land in a stream.
        if (
          !msg.reply ||
          !msg.subject.startsWith(prefix) ||
          isStoredSubject(this.names, msg.reply)
        ) {
          this.ignored.note({ subject: msg.subject });
          return;
        }
        const p = this.handle(msg.subject.slice(prefix.length), msg);
        this.inflight.add(p);
        void p.finally(() => this.inflight.delete(p));
      },
    });
  }

  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    this.sub = null;
    await Promise.allSettled([...this.inflight]);
  }

  private async handle(rest: string, msg: Msg): Promise<void> {
    const started = performance.now();
    this.log.debug('reader consumer create asked', { rest });
    try {
      let body: unknown;
      try {
        body = JSON.parse(new TextDecoder().decode(msg.data));
      } catch {
        body = null;
      }
      const checked = checkReaderConsumer(rest, body, this.inboxes);
      if (isRefusal(checked)) {
        this.log.warn('reader consumer refused', {
          stream: rest.split('.')[0],
          why: checked.refused,
        });
        msg.respond(refusal(checked.refused));
        return;
      }
      if (checked.name !== null && (await this.exists(checked.stream, checked.name))) {
        const why = `consumer ${JSON.stringify(checked.name)} already exists on ${checked.stream}: a create would change it`;
        this.log.warn('reader consumer refused', { stream: checked.stream, why });
        msg.respond(refusal(why));
        return;
      }
      // the create as checked, rebuilt: never the bytes as they came
      const answer = await this.nc.request(
        `$JS.API.CONSUMER.CREATE.${rest}`,
        JSON.stringify(checked.body),
        { timeout: CREATE_TIMEOUT_MS },
      );
      msg.respond(answer.data);
      this.log.debug('reader consumer create answered', {
        rest,
        ms: Math.round(performance.now() - started),
      });
    } catch (err) {
      // JetStream did not answer in time, or the connection is gone: the reader's request
      // times out and nats.js asks again.
      this.log.warn('reader consumer create not answered', { err });
    }
  }

  private async exists(stream: string, name: string): Promise<boolean> {
    if (this.jsm === null) {
      const made = jetstreamManager(this.nc);
      this.jsm = made;
      // made during an outage: asked again at the next create, not kept failing
      made.catch(() => {
        if (this.jsm === made) this.jsm = null;
      });
    }
    try {
      await (await this.jsm).consumers.info(stream, name);
      return true;
    } catch (err) {
      if (err instanceof Error && /consumer not found/i.test(err.message)) return false;
      throw err;
    }
  }
}
