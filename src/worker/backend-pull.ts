/**
 * A tag's dispatch messages pulled through a backend (secure mode, when the enrollment names
 * a pull subject): the worker asks `<pullSubject>.<tag>` with `{batch, expiresMs}` on an inbox
 * of its own; a backend pulls the tag's consumer for it and relays each message, its ack
 * subject in the `Sonar-Ack` header, then sends one end message (`Sonar-Pull-End`) whose
 * body is an API reply. The worker settles each message on its ack subject as JetStream
 * defines it (`+ACK`, `-NAK`, `+TERM`), which its credential may publish to.
 *
 * @module
 */
import { createInbox, nanos } from '@nats-io/nats-core';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { ErrorCode } from '../../actors/errors.js';
import { inboxPrefixOf } from '../../streams/nats-internals.js';
import { PULL_ACK_HEADER, PULL_END_HEADER } from '../protocol.js';
import type { PullRequest } from '../protocol.js';
import { ApiError, isApiError, okOf } from './api-client.js';
import type { Delivery, DispatchSource, PullBatch } from './dispatch-source.js';

/** How long after its own expiry a pull waits for the backend's end message. */
const END_GRACE_MS = 2_000;

const encoder = new TextEncoder();
const ACK = encoder.encode('+ACK');
const TERM = encoder.encode('+TERM');

/** Pulls one tag through the backends, on `<pullSubject>.<tag>`. */
export class BackendSource implements DispatchSource {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
  ) {}

  pull(batch: number, expiresMs: number): Promise<PullBatch> {
    return Promise.resolve(new BackendPull(this.nc, this.subject, { batch, expiresMs }));
  }

  /** The backend says `not_found` when the tag's consumer is gone. */
  gone(err: unknown): Promise<boolean> {
    return Promise.resolve(isApiError(err, ErrorCode.NotFound));
  }
}

class BackendPull implements PullBatch {
  private readonly sub: Subscription;
  private readonly timer: NodeJS.Timeout;
  private readonly queue: Delivery[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private failure: Error | null = null;
  /** Closed before its end: what still comes is nak'ed, not left to the ack wait. */
  private abandoned = false;
  private onEnd: () => void = () => {};
  /** Settles at the end message, or when the backend's end is given up on. */
  private readonly endedPromise = new Promise<void>((resolve) => (this.onEnd = resolve));

  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
    req: PullRequest,
  ) {
    this.sub = nc.subscribe(createInbox(inboxPrefixOf(nc)), {
      callback: (err, msg) => this.take(err, msg),
    });
    // No backend, or one that stopped mid-pull: nothing ends the pull but this timer (a
    // request crossing an account import gets no "no responders").
    this.timer = setTimeout(
      () =>
        this.finish(
          new ApiError(
            'pull',
            ErrorCode.Unavailable,
            `pull: no backend answered ${subject} in time`,
          ),
        ),
      req.expiresMs + END_GRACE_MS,
    );
    // A drained worker need not stay up for it: the close it waits on ends with the process.
    this.timer.unref();
    nc.publish(subject, encoder.encode(JSON.stringify(req)), { reply: this.sub.getSubject() });
  }

  private take(err: Error | null, msg: Msg): void {
    if (err) {
      this.finish(err);
      return;
    }
    if (msg.headers?.get(PULL_END_HEADER)) {
      try {
        okOf('pull', parseReply(msg));
        this.finish(null);
      } catch (e: unknown) {
        this.finish(e instanceof Error ? e : new ApiError('pull', ErrorCode.Unknown, String(e)));
      }
      return;
    }
    const ack = msg.headers?.get(PULL_ACK_HEADER) ?? '';
    if (!ack.startsWith('$JS.ACK.')) return;
    const delivery = new RelayedDelivery(this.nc, msg, ack);
    if (this.abandoned) delivery.nak();
    else {
      this.queue.push(delivery);
      this.wake?.();
    }
  }

  private finish(failure: Error | null): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = failure;
    clearTimeout(this.timer);
    this.sub.unsubscribe();
    this.wake?.();
    this.onEnd();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Delivery> {
    try {
      for (;;) {
        if (this.abandoned) return;
        const next = this.queue.shift();
        if (next !== undefined) {
          yield next;
          continue;
        }
        if (this.ended) {
          if (this.failure !== null) throw this.failure;
          return;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = null;
      }
    } finally {
      await this.close();
    }
  }

  /**
   * Takes no more: the messages still queued are nak'ed, and so is what the backend relays
   * until its end message, so none waits out the ack wait. Settles at that end (at most the
   * pull's wait and a grace later), so a draining worker keeps its connection until then.
   */
  close(): Promise<void> {
    if (!this.ended && !this.abandoned) {
      this.abandoned = true;
      for (const d of this.queue.splice(0)) d.nak();
      this.wake?.();
    }
    return this.endedPromise;
  }
}

function parseReply(msg: Msg): unknown {
  try {
    return msg.json();
  } catch {
    throw new ApiError('pull', ErrorCode.Unavailable, 'pull: the end of the pull is not JSON');
  }
}

/** A relayed dispatch message, settled on its JetStream ack subject. */
class RelayedDelivery implements Delivery {
  constructor(
    private readonly nc: NatsConnection,
    private readonly msg: Msg,
    private readonly ackSubject: string,
  ) {}

  /** The stream sequence, from the ack subject (`$JS.ACK.<stream>.<consumer>.<n>.<seq>...`). */
  get seq(): number {
    const tokens = this.ackSubject.split('.');
    // 9 tokens without a JetStream domain; 12 or more with one (domain and account hash)
    return Number(tokens[tokens.length === 9 ? 5 : 7]);
  }

  get headers() {
    return this.msg.headers;
  }

  json<T>(): T {
    return this.msg.json<T>();
  }

  ack(): void {
    this.nc.publish(this.ackSubject, ACK);
  }

  nak(millis?: number): void {
    const body = millis === undefined ? '-NAK' : `-NAK ${JSON.stringify({ delay: nanos(millis) })}`;
    this.nc.publish(this.ackSubject, encoder.encode(body));
  }

  term(): void {
    this.nc.publish(this.ackSubject, TERM);
  }
}
