import { JetStreamApiError, JetStreamError, PubHeaders } from '@nats-io/jetstream';
import type { ApiError } from '@nats-io/jetstream';
import { TimeoutError, createInbox, headers } from '@nats-io/transport-node';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { inboxPrefixOf } from './nats-internals.js';

/** One message for {@link publishPipelined}. */
export interface PipelinedMessage {
  subject: string;
  payload: Uint8Array;
  /** Sent as `Nats-Msg-Id`: the server stores a repeated id once (its dedupe window). */
  msgId: string;
  /** Sent as `Nats-Expected-Last-Subject-Sequence`; omitted, nothing is expected. */
  expectedLastSubjectSeq?: number;
}

/** What the server answered for one message (the fields of a PubAck that Sonar reads). */
export interface PipelinedAck {
  seq: number;
  duplicate: boolean;
}

export interface PipelineOptions {
  /** Messages in flight at once. */
  window: number;
  /** With messages in flight and no ack for this long, the rest fail with a TimeoutError. */
  timeoutMs: number;
}

const decoder = new TextDecoder();

/**
 * Publishes many messages to JetStream, up to `window` in flight, their acks all coming back
 * to one inbox subscription made for this call. Results are in input order; a refused message
 * (a JetStreamApiError such as 10071, wrong last sequence) is a rejected entry and the others
 * still land.
 *
 * Why not `js.publish` each: every `js.publish` is a nats.js request, with a muxed-inbox
 * entry, a deferred, a timer of its own, and, when it settles, a `RequestError("cancelled")`
 * built (stack trace and all) only to be dropped. In the submit bench that machinery and its
 * garbage were about a fifth of the backend's CPU. The server sees exactly what `js.publish`
 * sends: an HPUB with the same `Nats-Msg-Id` and expected-sequence headers and a reply subject,
 * answered with the same PubAck; optimistic concurrency and dedupe stay the server's.
 * Its one caller is EventStore.appendMany: the events stream keeps a single writer.
 */
export function publishPipelined(
  nc: NatsConnection,
  messages: readonly PipelinedMessage[],
  opts: PipelineOptions,
): Promise<PromiseSettledResult<PipelinedAck>[]> {
  const count = messages.length;
  const results = new Array<PromiseSettledResult<PipelinedAck> | undefined>(count);
  if (count === 0) return Promise.resolve([]);
  return new Promise((resolve) => {
    const inbox = createInbox(inboxPrefixOf(nc));
    const tokenAt = inbox.length + 1;
    let next = 0;
    let settled = 0;
    let lastProgressMs = performance.now();
    let timer: NodeJS.Timeout | undefined;

    const settle = (i: number, r: PromiseSettledResult<PipelinedAck>): void => {
      results[i] = r;
      settled++;
    };
    let done = false;
    const finishIfDone = (): void => {
      if (done || settled < count) return;
      done = true;
      clearTimeout(timer);
      sub.unsubscribe();
      resolve(results as PromiseSettledResult<PipelinedAck>[]);
    };
    // Everything not yet answered fails: sent ones may still be stored, so a caller retries
    // them with the same msg id (deduped), as after a timed-out js.publish.
    const failRest = (reason: unknown): void => {
      for (let i = 0; i < count; i++) {
        if (results[i] === undefined) settle(i, { status: 'rejected', reason });
      }
      next = count;
      finishIfDone();
    };
    const fill = (): void => {
      while (next < count && next - settled < opts.window) {
        const i = next++;
        const m = messages[i]!;
        const h = headers();
        h.set(PubHeaders.MsgIdHdr, m.msgId);
        if (m.expectedLastSubjectSeq !== undefined) {
          h.set(PubHeaders.ExpectedLastSubjectSequenceHdr, `${m.expectedLastSubjectSeq}`);
        }
        try {
          nc.publish(m.subject, m.payload, { reply: `${inbox}.${i}`, headers: h });
        } catch (err: unknown) {
          // A closed connection or a payload over max_payload: this one is not sent.
          settle(i, { status: 'rejected', reason: err });
        }
      }
      finishIfDone();
    };
    const onAck = (err: Error | null, msg: Msg): void => {
      if (err) return failRest(err); // the subscription itself was refused (permissions)
      const i = Number(msg.subject.slice(tokenAt));
      // Unknown, or answered already (timed out before this late ack): nothing to do.
      if (!Number.isInteger(i) || i < 0 || i >= count || results[i] !== undefined) return;
      lastProgressMs = performance.now();
      settle(i, ackOf(msg, messages[i]!.subject));
      fill();
    };
    const onTimer = (): void => {
      const idleMs = performance.now() - lastProgressMs;
      if (idleMs >= opts.timeoutMs) failRest(new TimeoutError());
      else timer = setTimeout(onTimer, opts.timeoutMs - idleMs);
    };

    // Subscribed before the first publish on the same connection, so the server knows the
    // inbox before any ack is due (it handles one client's protocol lines in order).
    const sub = nc.subscribe(`${inbox}.*`, { callback: onAck });
    timer = setTimeout(onTimer, opts.timeoutMs);
    fill();
  });
}

/** One ack: the PubAck, or the error `js.publish` would have thrown for it. */
export function ackOf(msg: Msg, subject: string): PromiseSettledResult<PipelinedAck> {
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
