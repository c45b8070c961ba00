import { JetStreamApiError, JetStreamError, PubHeaders } from '@nats-io/jetstream';
import type { ApiError } from '@nats-io/jetstream';
import {
  DrainingConnectionError,
  PermissionViolationError,
  TimeoutError,
  createInbox,
  headers,
} from '@nats-io/transport-node';
import type { Msg, MsgHdrs, NatsConnection, Subscription } from '@nats-io/transport-node';
import { inboxPrefixOf } from './nats-internals.js';

/** One message for {@link AckedPublisher}. */
export interface AckedMessage {
  subject: string;
  payload: Uint8Array;
  /** Sent as `Nats-Msg-Id`: the server stores a repeated id once (its dedupe window). */
  msgId: string;
  /** Sent as `Nats-Expected-Last-Subject-Sequence`; omitted, nothing is expected. */
  expectedLastSubjectSeq?: number;
  /** More headers (a trace context); the msg id and expectation are set on top of them. */
  headers?: MsgHdrs;
}

/** What the server answered for one message (the fields of a PubAck that Sonar reads). */
export interface PublishAck {
  seq: number;
  duplicate: boolean;
}

/** nats.js's JetStream request timeout when none is configured, and so `js.publish`'s. */
export const JS_TIMEOUT_MS = 5_000;

/** How a publish ends: its ack, or what `js.publish` would have thrown. */
type Settle = (r: PromiseSettledResult<PublishAck>) => void;

interface Pending {
  settle: Settle;
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
 * same PubAck; dedupe and optimistic concurrency stay the server's, and so do the errors (a
 * JetStreamApiError for a refusal, such as 10071 for a stale expected sequence), with a
 * TimeoutError after `timeoutMs`, as `js.publish`'s.
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
  publish(m: AckedMessage): Promise<PublishAck> {
    return new Promise((resolve, reject) => {
      try {
        this.send(m, (r) => {
          if (r.status === 'fulfilled') resolve(r.value);
          else reject(r.reason instanceof Error ? r.reason : new Error(String(r.reason)));
        });
      } catch (err: unknown) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /**
   * Publishes many messages, at most `window` in flight: many aggregates at once without a
   * round trip each. Results are in input order; a refused message is a rejected entry and
   * the others still land. A sent one that failed (a timeout) may still be stored: a caller
   * retries it with the same msg id, which the server dedupes. Callbacks, not a promise per
   * message: this is the bulk path (a submit of 100k tasks).
   */
  publishAll(
    messages: readonly AckedMessage[],
    window: number,
  ): Promise<PromiseSettledResult<PublishAck>[]> {
    const count = messages.length;
    const results = new Array<PromiseSettledResult<PublishAck>>(count);
    return new Promise((resolve) => {
      let next = 0;
      let settled = 0;
      const fill = (): void => {
        while (next < count && next - settled < window) {
          const i = next++;
          try {
            this.send(messages[i]!, (r) => {
              results[i] = r;
              settled++;
              fill();
            });
          } catch (reason: unknown) {
            results[i] = { status: 'rejected', reason };
            settled++;
          }
        }
        if (settled === count) resolve(results);
      };
      fill();
    });
  }

  /**
   * Sends `m` with a reply subject under the inbox; `settle` is called once, later, with its
   * ack. Throws, sending nothing, when it cannot be sent.
   */
  private send(m: AckedMessage, settle: Settle): void {
    // A draining connection has dropped the inbox already: the message would be stored and
    // its ack lost. Refused before sending, as nats.js refuses a request then.
    if (this.nc.isDraining()) throw new DrainingConnectionError();
    this.subscribed();
    const id = this.nextId++;
    const h = m.headers ?? headers();
    h.set(PubHeaders.MsgIdHdr, m.msgId);
    if (m.expectedLastSubjectSeq !== undefined) {
      h.set(PubHeaders.ExpectedLastSubjectSequenceHdr, `${m.expectedLastSubjectSeq}`);
    }
    // A closed connection or a payload over max_payload throws here: this one is not sent.
    this.nc.publish(m.subject, m.payload, { reply: `${this.inbox}.${id}`, headers: h });
    this.pending.set(id, {
      settle,
      subject: m.subject,
      deadline: performance.now() + this.timeoutMs,
    });
    this.arm();
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
      // The status iterator ends, without throwing, when the connection closes.
      this.watchRefusals().catch(() => undefined);
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
        p.settle({ status: 'rejected', reason: err });
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
    p.settle(ackOf(msg, p.subject));
  }

  private arm(): void {
    if (this.sweeper !== null) return;
    const first = this.pending.values().next();
    if (first.done) return;
    const wait = Math.max(0, first.value.deadline - performance.now());
    this.sweeper = setTimeout(() => this.sweep(), wait + 1);
  }

  // Both collect before settling: a settle may publish again (publishAll's next message).
  private sweep(): void {
    this.sweeper = null;
    const now = performance.now();
    const expired: Pending[] = [];
    for (const [id, p] of this.pending) {
      if (p.deadline > now) break;
      this.pending.delete(id);
      expired.push(p);
    }
    for (const p of expired) p.settle({ status: 'rejected', reason: new TimeoutError() });
    this.arm();
  }

  private failAll(err: unknown): void {
    const failed = [...this.pending.values()];
    this.pending.clear();
    if (this.sweeper !== null) clearTimeout(this.sweeper);
    this.sweeper = null;
    for (const p of failed) p.settle({ status: 'rejected', reason: err });
  }
}

const decoder = new TextDecoder();

/** One ack: the PubAck, or the error `js.publish` would have thrown for it. */
function ackOf(msg: Msg, subject: string): PromiseSettledResult<PublishAck> {
  // An empty status message: no stream listens on the subject (503 no responders).
  if (msg.data.length === 0) {
    const code = msg.headers?.code ?? 0;
    const reason = new JetStreamError(`no stream answered a publish to ${subject} (${code})`);
    return { status: 'rejected', reason };
  }
  let v: { stream?: string; seq?: number; duplicate?: boolean; error?: ApiError };
  try {
    v = JSON.parse(decoder.decode(msg.data)) as typeof v;
  } catch (err: unknown) {
    return {
      status: 'rejected',
      reason: new JetStreamError('invalid ack response', { cause: err }),
    };
  }
  if (v.error) return { status: 'rejected', reason: new JetStreamApiError(v.error) };
  if (!v.stream || typeof v.seq !== 'number') {
    return { status: 'rejected', reason: new JetStreamError('invalid ack response') };
  }
  return { status: 'fulfilled', value: { seq: v.seq, duplicate: v.duplicate === true } };
}
