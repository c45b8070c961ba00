import { PubHeaders } from '@nats-io/jetstream';
import {
  DrainingConnectionError,
  PermissionViolationError,
  TimeoutError,
  createInbox,
  headers,
} from '@nats-io/transport-node';
import type { Msg, MsgHdrs, NatsConnection, Subscription } from '@nats-io/transport-node';
import { inboxPrefixOf } from './nats-internals.js';
import { ackOf } from './pipelined-publish.js';
import type { PipelinedAck, PipelinedMessage } from './pipelined-publish.js';

/** A message for {@link AckedPublisher.publish}: a pipelined message, plus headers of its own. */
export interface AckedMessage extends PipelinedMessage {
  /** More headers (a trace context); the msg id and expectation are set on top of them. */
  headers?: MsgHdrs;
}

/** nats.js's JetStream request timeout when none is configured, and so `js.publish`'s. */
export const JS_TIMEOUT_MS = 5_000;

interface Pending {
  resolve: (ack: PipelinedAck) => void;
  reject: (err: unknown) => void;
  subject: string;
  /** performance.now() past which the publish fails with a TimeoutError. */
  deadline: number;
}

/**
 * Publishes to JetStream one message at a time, each answered by its PubAck, with every ack
 * of the connection coming back to one long-lived inbox subscription.
 *
 * Why not `js.publish`: each is a nats.js request, with a muxed-inbox entry, a deferred, a
 * timer of its own and a copy of its options; a backend makes several per task, and at
 * saturation that machinery is a visible share of its CPU (docs/benchmarks.md). Here a
 * publish is a map entry, and one timer sweeps the deadlines. The server sees what
 * `js.publish` sends: an HPUB with the same headers and a reply subject, answered with the
 * same PubAck; dedupe and optimistic concurrency stay the server's, and the errors are those
 * of `publishPipelined` (a JetStreamApiError for a refusal, a TimeoutError after `timeoutMs`).
 */
export class AckedPublisher {
  private sub: Subscription | null = null;
  private inbox = '';
  private tokenAt = 0;
  private nextId = 0;
  /** In publish order, so deadlines (a constant timeout after each publish) are ascending. */
  private readonly pending = new Map<number, Pending>();
  private sweeper: NodeJS.Timeout | null = null;
  private watching = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs = JS_TIMEOUT_MS,
  ) {}

  /** Publishes `m`; resolves with its ack, rejects with what `js.publish` would have thrown. */
  publish(m: AckedMessage): Promise<PipelinedAck> {
    return new Promise((resolve, reject) => {
      try {
        // A draining connection has dropped the inbox already: the message would be stored
        // and its ack lost. Refused before sending, as nats.js refuses a request then.
        if (this.nc.isDraining()) throw new DrainingConnectionError();
        this.subscribed();
        const id = this.nextId++;
        const h = m.headers ?? headers();
        h.set(PubHeaders.MsgIdHdr, m.msgId);
        if (m.expectedLastSubjectSeq !== undefined) {
          h.set(PubHeaders.ExpectedLastSubjectSequenceHdr, `${m.expectedLastSubjectSeq}`);
        }
        this.pending.set(id, {
          resolve,
          reject,
          subject: m.subject,
          deadline: performance.now() + this.timeoutMs,
        });
        try {
          this.nc.publish(m.subject, m.payload, { reply: `${this.inbox}.${id}`, headers: h });
        } catch (err: unknown) {
          // A closed connection or a payload over max_payload: this one is not sent.
          this.pending.delete(id);
          throw err;
        }
        this.arm();
      } catch (err: unknown) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Publishes in flight (for tests). */
  get inFlight(): number {
    return this.pending.size;
  }

  /**
   * The inbox subscription, made once and again after it ended (a permissions refusal). On a
   * reconnect nats.js subscribes it again by itself. Made before the first publish on the
   * same connection, so the server knows it before any ack is due.
   */
  private subscribed(): void {
    // The inbox is a fresh nuid, as nats.js's own is; the ids after it count, so whoever
    // sees one reply subject could answer the others. In secure mode only backends may
    // publish to a role's inbox (src/auth/permissions.ts); in open mode anyone may read
    // and publish anything anyway.
    if (this.sub !== null && !this.sub.isClosed()) return;
    this.inbox = createInbox(inboxPrefixOf(this.nc));
    this.tokenAt = this.inbox.length + 1;
    this.sub = this.nc.subscribe(`${this.inbox}.*`, {
      callback: (err, msg) => this.onAck(err, msg),
    });
    if (!this.watching) {
      this.watching = true;
      // A closed connection answers nothing more: fail what waits now, not at its deadline.
      void this.nc.closed().then((err) => this.failAll(err ?? new Error('connection closed')));
      void this.watchRefusals();
    }
  }

  /**
   * A publish the account may not make is answered by no ack, only by a `-ERR` on the
   * connection: fail the oldest publish to that subject with it at once (the nats.js request
   * mux does the same for a request), so the cause shows instead of a timeout.
   */
  private async watchRefusals(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type !== 'error') continue;
      const err = s.error;
      if (!(err instanceof PermissionViolationError) || err.operation !== 'publish') continue;
      for (const [id, p] of this.pending) {
        if (p.subject !== err.subject) continue;
        this.pending.delete(id);
        p.reject(err);
        break;
      }
    }
  }

  private onAck(err: Error | null, msg: Msg): void {
    if (err) {
      this.sub = null;
      return this.failAll(err); // the subscription itself was refused (permissions)
    }
    const id = Number(msg.subject.slice(this.tokenAt));
    const p = this.pending.get(id);
    if (p === undefined) return; // timed out already: the late ack changes nothing
    this.pending.delete(id);
    const r = ackOf(msg, p.subject);
    if (r.status === 'fulfilled') p.resolve(r.value);
    else p.reject(r.reason);
  }

  private arm(): void {
    if (this.sweeper !== null) return;
    const first = this.pending.values().next();
    if (first.done) return;
    const wait = Math.max(0, first.value.deadline - performance.now());
    this.sweeper = setTimeout(() => this.sweep(), wait + 1);
  }

  private sweep(): void {
    this.sweeper = null;
    const now = performance.now();
    for (const [id, p] of this.pending) {
      if (p.deadline > now) break;
      this.pending.delete(id);
      p.reject(new TimeoutError());
    }
    this.arm();
  }

  private failAll(err: unknown): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    if (this.sweeper !== null) clearTimeout(this.sweeper);
    this.sweeper = null;
  }
}
