/**
 * Pulls made by the backend for workers (secure mode, docs/threat-model.md). A worker asks
 * `<prefix>.pull.<workerId>.<tag>` with `{batch, expiresMs}`; a backend pulls that tag's
 * dispatch consumer for it and relays each message to the worker's reply, the message's ack
 * subject in a header, then sends one end message.
 *
 * Why not let workers pull: a credential allowed to pull the dispatch consumers may pull any
 * tag's (NATS permissions cannot follow each worker's tags), reading other tags' inputs, and
 * may keep hundreds of long pulls open until JetStream refuses every other worker's
 * (`max_waiting`). Here the subject proves the worker, the backend checks it joined with the
 * tag and is Active, bounds the batch by its slots, and keeps at most
 * {@link OPEN_PULLS_PER_TAG} pulls open per worker and tag in this backend. The cost is one
 * relayed message per dispatch, paid only in secure mode.
 *
 * @module
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/nats-core';
import type { Msg, Subscription } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { isConsumerNotFoundApiError } from '../../../streams/errors.js';
import { isId } from '../../../streams/ids.js';
import { isStoredSubject } from '../../../streams/names.js';
import { ackSubjectOf } from '../../../streams/nats-internals.js';
import type { Logger } from '../../log.js';
import {
  PULL_ACK_HEADER,
  PULL_END_HEADER,
  PULL_MIN_EXPIRES_MS,
  pullRequestSchema,
} from '../../protocol.js';
import type { PullRequest } from '../../protocol.js';
import { MAX_WORKER_TAGS } from '../../pulse-size.js';
import { ThrottledWarning } from '../../throttled-warning.js';
import type { BackendContext } from '../context.js';
import { errorReply, parseJson, validationErrorOf } from './api-service.js';
import { goneError, notJoinedError, workerOf } from './handlers/worker-state.js';

const QUEUE = 'sonar-dispatch-pulls';

/**
 * Open pulls a worker may have per tag in one backend. A worker's loop keeps one per tag; a
 * second covers a pull it gave up on (its own timer ran out) while the backend still ends it.
 */
export const OPEN_PULLS_PER_TAG = 2;

/** Open pulls a worker may have in all in one backend: two for each tag a join allows. */
export const OPEN_PULLS_PER_WORKER = OPEN_PULLS_PER_TAG * MAX_WORKER_TAGS;

/**
 * Most messages one pull takes, whatever the worker's slots: a worker that declared many
 * slots still holds no more than this per pull.
 */
export const MAX_BATCH_PER_PULL = 256;

const encoder = new TextEncoder();

export class DispatchPulls {
  private sub: Subscription | null = null;
  private stopping = false;
  /** Open pulls by `<workerId>.<tag>`, and by `<workerId>` across its tags. */
  private readonly open = new Map<string, number>();
  private readonly consumers = new Map<string, Promise<Consumer>>();
  private readonly inflight = new Set<Promise<void>>();
  private readonly batches = new Set<{ close(): Promise<void | Error> }>();
  private readonly ignored: ThrottledWarning;
  private readonly refused: ThrottledWarning;

  constructor(
    private readonly ctx: BackendContext,
    private readonly log: Logger,
  ) {
    this.ignored = new ThrottledWarning(log, 'pull messages ignored: not a request', 'ignored');
    this.refused = new ThrottledWarning(log, 'pulls refused', 'refused');
  }

  start(): void {
    if (this.sub) return;
    this.stopping = false;
    const n = this.ctx.names;
    const prefix = `${n.prefix}.pull.`;
    this.sub = this.ctx.nc.subscribe(n.subjects.pullAll, {
      queue: QUEUE,
      callback: (err, msg) => {
        if (err) {
          this.log.error('pull subscription failed', { err });
          return;
        }
        const [workerId, tag] = msg.subject.slice(prefix.length).split('.');
        // An answer aimed here has no reply, or JetStream's delivery shows its stream's
        // subject; a stored reply would have the answers written into a stream.
        if (
          !msg.reply ||
          !msg.subject.startsWith(prefix) ||
          isStoredSubject(n, msg.reply) ||
          !isId(workerId) ||
          !isId(tag)
        ) {
          this.ignored.note({ subject: msg.subject });
          return;
        }
        const p = this.serve(workerId, tag, msg, msg.reply).catch((err: unknown) =>
          this.log.error('pull failed', { workerId, tag, err }),
        );
        this.inflight.add(p);
        void p.finally(() => this.inflight.delete(p));
      },
    });
  }

  /** Stops taking pulls and ends the open ones: what they hold comes back after ack_wait. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.sub?.unsubscribe();
    this.sub = null;
    await Promise.allSettled([...this.batches].map((b) => b.close()));
    await Promise.allSettled([...this.inflight]);
  }

  private async serve(workerId: string, tag: string, msg: Msg, reply: string): Promise<void> {
    // Counted on arrival, before any await: pulls that arrive together are all counted.
    // Per tag, and per worker whatever the tags it names (a tag it did not join with is
    // refused, but only after a look at the projection).
    const key = `${workerId}.${tag}`;
    const open = this.open.get(key) ?? 0;
    const openOfWorker = this.open.get(workerId) ?? 0;
    if (open >= OPEN_PULLS_PER_TAG || openOfWorker >= OPEN_PULLS_PER_WORKER) {
      const err = new SonarError(
        ErrorCode.Unavailable,
        `pull: worker ${workerId} already has ${open} pulls open for tag ${tag}, ${openOfWorker} in all`,
        { workerId, tag, open, openOfWorker },
      );
      this.refused.note({ workerId, tag, err });
      this.end(reply, errorReply(err));
      return;
    }
    this.open.set(key, open + 1);
    this.open.set(workerId, openOfWorker + 1);
    const arrived = performance.now();
    try {
      const req = this.parse(msg.data);
      const slots = await this.check(workerId, tag);
      const batch = Math.min(req.batch, slots, MAX_BATCH_PER_PULL);
      // The worker's wait started when it asked: what the checks took comes off it, so the
      // end reaches the worker within the time it gave (nats.js pulls for 1 s at least).
      const left = Math.floor(req.expiresMs - (performance.now() - arrived));
      const delivered =
        left <= 0 || this.stopping
          ? 0
          : await this.relay(tag, batch, Math.max(PULL_MIN_EXPIRES_MS, left), reply);
      this.end(reply, { ok: { delivered } });
      this.log.debug('pull ended', { workerId, tag, delivered });
    } catch (err: unknown) {
      this.refused.note({ workerId, tag, err });
      this.end(reply, errorReply(err));
    } finally {
      this.release(key);
      this.release(workerId);
    }
  }

  private release(key: string): void {
    const left = (this.open.get(key) ?? 1) - 1;
    if (left > 0) this.open.set(key, left);
    else this.open.delete(key);
  }

  private parse(data: Uint8Array): PullRequest {
    const parsed = pullRequestSchema.safeParse(parseJson('pull', data));
    if (!parsed.success) throw validationErrorOf('pull', parsed.error);
    return parsed.data;
  }

  /**
   * The worker's slots, once it is known to be Active and joined with `tag`. The projection
   * is read as it stands first: catching up costs a round trip, paid only for a worker or
   * tag it does not show yet (a join just made on another backend).
   */
  private async check(workerId: string, tag: string): Promise<number> {
    // A worker's tags never change after its join: one known Active is judged as it stands.
    const known = this.ctx.loop.projection.workers.get(workerId)?.snapshot;
    const worker = known?.value === 'Active' ? known : await workerOf(this.ctx, workerId);
    if (!worker) throw notJoinedError(workerId);
    if (worker.value === 'Lost' || worker.value === 'Left') throw goneError(workerId, worker.value);
    if (worker.value !== 'Active') {
      throw new SonarError(ErrorCode.Conflict, `pull: worker ${workerId} is ${worker.value}`, {
        workerId,
        state: worker.value,
      });
    }
    if (!worker.context.tags.includes(tag)) {
      throw new SonarError(
        ErrorCode.Forbidden,
        `pull: worker ${workerId} did not join with tag ${tag}`,
        { workerId, tag },
      );
    }
    return worker.context.slots;
  }

  /** Pulls up to `batch` of `tag`'s messages and relays each to `reply`; how many it relayed. */
  private async relay(
    tag: string,
    batch: number,
    expiresMs: number,
    reply: string,
  ): Promise<number> {
    const consumer = await this.consumer(tag);
    if (this.stopping) return 0;
    let messages;
    try {
      messages = await consumer.fetch({ max_messages: batch, expires: expiresMs });
    } catch (err: unknown) {
      this.consumers.delete(tag);
      throw err;
    }
    this.batches.add(messages);
    if (this.stopping) void messages.close();
    let relayed = 0;
    try {
      for await (const m of messages) {
        // Stopping, or more than asked (nats.js pulls again after a reconnect): given back.
        if (this.stopping || relayed >= batch) {
          m.nak();
          continue;
        }
        try {
          this.forward(m, reply);
          relayed++;
        } catch (err: unknown) {
          // One message that cannot be relayed (over the server's max_payload with its
          // headers): given back, and the rest of the pull goes on.
          m.nak();
          this.refused.note({ tag, seq: m.seq, err });
        }
        if (relayed >= batch) void messages.close();
      }
    } catch (err: unknown) {
      // The consumer went away mid-pull (a sweep, a stream reset): found again next time.
      this.consumers.delete(tag);
      if (relayed === 0) throw err;
    } finally {
      this.batches.delete(messages);
    }
    return relayed;
  }

  private forward(m: JsMsg, reply: string): void {
    const h = headers();
    for (const k of m.headers?.keys() ?? []) {
      for (const v of m.headers!.values(k)) h.append(k, v);
    }
    h.set(PULL_ACK_HEADER, ackSubjectOf(m));
    this.ctx.nc.publish(reply, m.data, { headers: h });
  }

  private end(reply: string, body: unknown): void {
    const h = headers();
    h.set(PULL_END_HEADER, '1');
    try {
      this.ctx.nc.publish(reply, encoder.encode(JSON.stringify(body)), { headers: h });
    } catch {
      // The connection is gone: the worker's pull runs out on its own.
    }
  }

  /** The tag's dispatch consumer, looked up once (`join` made it). */
  private consumer(tag: string): Promise<Consumer> {
    let c = this.consumers.get(tag);
    if (c === undefined) {
      const { names } = this.ctx;
      c = this.ctx.js.consumers.get(names.streams.dispatch, names.consumers.dispatch(tag));
      this.consumers.set(tag, c);
      c.catch(() => this.consumers.delete(tag));
    }
    return c.catch((err: unknown) => {
      if (!isConsumerNotFoundApiError(err)) throw err;
      throw new SonarError(
        ErrorCode.NotFound,
        `pull: the dispatch consumer of tag ${tag} is gone: join again to have it made`,
        { tag },
      );
    });
  }
}
