import { DeliverPolicy, JetStreamApiError, JetStreamApiCodes } from '@nats-io/jetstream';
import type {
  Consumer,
  JetStreamClient,
  JetStreamManager,
  JsMsg,
  OrderedConsumerOptions,
  MsgRequest,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { EVENT_VERSION } from '../actors/events.js';
import type { EventRecord } from '../actors/projection.js';
import { decodeEnvelope, encodeEnvelope } from './envelope.js';
import { ConcurrencyError } from './errors.js';
import { AckedPublisher } from './acked-publisher.js';
import { jetstreamManagerOf, jetstreamOf } from './jetstream-api.js';
import type { Names } from './names.js';

/** An event to append: the id becomes the `Nats-Msg-Id`, so a retried append is stored once. */
export interface NewEvent {
  id: string;
  type: string;
  data: unknown;
}

export interface AppendOptions {
  /**
   * The subject's last stream sequence this writer saw (0 = the subject is empty). The server
   * refuses the append when another writer moved the aggregate since: ConcurrencyError.
   * Omit only for appends that need no ordering (none in Sonar's write path).
   */
  expectedSeq?: number;
  /**
   * `encodeEnvelope(event)`, when the caller encoded it already (to know its own write by
   * its bytes when the stream delivers it back).
   */
  payload?: Uint8Array;
}

/** One entry of `appendMany`: an event, its subject, and what `append` takes with them. */
export interface AppendItem extends AppendOptions {
  subject: string;
  event: NewEvent;
}

export interface Appended {
  seq: number;
  /** True when the server had already stored this event id (inside the dedupe window). */
  duplicate: boolean;
}

export interface ReadOptions {
  /** A single subject filter (2.9 refuses several). Default: all events. */
  filter?: string;
  /** First stream sequence to read. Default: 1. */
  fromSeq?: number;
  /** Start at this time instead (ISO-8601); `follow` only. */
  fromTime?: string;
  /** Only events appended from now on; `follow` only. */
  onlyNew?: boolean;
  /**
   * `followEach` only: gives back the event a payload was encoded from, when the caller wrote
   * these very bytes itself after validating the event. The record then carries that event
   * (`validated`) and is neither parsed nor validated again.
   */
  recognize?: (subject: string, payload: Uint8Array) => NewEvent | undefined;
}

let lastMs = -1;
let lastIso = '';

/** ISO-8601 of a JetStream timestamp; a bulk replay meets the same millisecond many times. */
function isoOf(nanos: number): string {
  const ms = Math.floor(nanos / 1e6);
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

/** Turns one stream message into the record replay folds (the server's timestamp as `time`). */
export function recordOf(m: JsMsg, recognize?: ReadOptions['recognize']): EventRecord {
  // Hot on replay: read the delivery info once, build the record in one literal.
  const info = m.info;
  const time = isoOf(info.timestampNanos);
  const own = recognize?.(m.subject, m.data);
  if (own) {
    return {
      seq: info.streamSequence,
      subject: m.subject,
      time,
      type: own.type,
      data: own.data,
      v: EVENT_VERSION,
      id: own.id,
      validated: true,
    };
  }
  const decoded = decodeEnvelope(m.data);
  if (!decoded.ok) {
    return {
      seq: info.streamSequence,
      subject: m.subject,
      time,
      type: null,
      data: null,
      decodeError: decoded.error.message,
    };
  }
  const e = decoded.value;
  return {
    seq: info.streamSequence,
    subject: m.subject,
    time,
    type: e.type,
    data: e.data,
    v: e.v,
    id: e.id,
  };
}

/**
 * The only writer of the events stream (STYLE C5): appends with optimistic concurrency, reads
 * one aggregate, replays the whole stream with an ordered consumer.
 */
export class EventStore {
  private jsmPromise: Promise<JetStreamManager> | null = null;
  private readerPromise: Promise<JetStreamClient> | null = null;
  /** endSeq's last look behind a stream end that was removed. */
  private knownEnd: { lastSeq: number; removed: number; end: number } | null = null;

  constructor(
    readonly nc: NatsConnection,
    readonly names: Names,
    /** Publishes the appends; the backend shares its own with the dispatch queue. */
    private readonly publisher = new AckedPublisher(nc),
  ) {}

  /** The manager reads go through: on the readers' API prefix for a client or operator. */
  jsm(): Promise<JetStreamManager> {
    this.jsmPromise ??= jetstreamManagerOf(this.nc, this.names);
    return this.jsmPromise;
  }

  /** The client replays go through (the appends' `js` is the backend's, in its own account). */
  private reader(): Promise<JetStreamClient> {
    this.readerPromise ??= jetstreamOf(this.nc, this.names);
    return this.readerPromise;
  }

  /**
   * An ordered consumer on the events stream. In the readers' account a backend makes it
   * (docs/threat-model.md): while no backend is connected (one restarting, or all of them
   * just back from an outage) the create goes unanswered, since no "no responders" crosses an
   * import, so it is asked again for up to {@link READER_CREATE_WAIT_MS}.
   */
  private async orderedConsumer(opts: Partial<OrderedConsumerOptions>): Promise<Consumer> {
    const js = await this.reader();
    const viaBackend = js.getOptions().apiPrefix !== undefined;
    const deadline = performance.now() + READER_CREATE_WAIT_MS;
    for (;;) {
      try {
        return await js.consumers.get(this.names.streams.events, opts);
      } catch (err) {
        const unanswered = err instanceof Error && /timeout|no responders/i.test(err.message);
        if (!viaBackend || !unanswered || performance.now() >= deadline) throw err;
      }
    }
  }

  /** Appends one event; maps a stale `expectedSeq` (err 10071) to ConcurrencyError. */
  async append(subject: string, event: NewEvent, opts: AppendOptions = {}): Promise<Appended> {
    try {
      return await this.publisher.publish({
        subject,
        payload: opts.payload ?? encodeEnvelope(event),
        msgId: event.id,
        ...(opts.expectedSeq !== undefined && { expectedLastSubjectSeq: opts.expectedSeq }),
      });
    } catch (err: unknown) {
      throw concurrencyErrorOf(err, subject, opts.expectedSeq);
    }
  }

  /**
   * Appends to many aggregates at once: up to `window` publishes in flight on the one
   * connection instead of a round trip each, with the same headers as `append`. Results are
   * in input order; a failed append is a rejected entry (a stale `expectedSeq` is a
   * ConcurrencyError), and the others still land.
   */
  async appendMany(
    items: readonly AppendItem[],
    window = 512,
  ): Promise<PromiseSettledResult<Appended>[]> {
    const acks = await this.publisher.publishAll(
      items.map((it) => ({
        subject: it.subject,
        payload: it.payload ?? encodeEnvelope(it.event),
        msgId: it.event.id,
        ...(it.expectedSeq !== undefined && { expectedLastSubjectSeq: it.expectedSeq }),
      })),
      window,
    );
    return acks.map((r, i) => {
      if (r.status === 'fulfilled') return r;
      const it = items[i]!;
      return {
        status: 'rejected',
        reason: concurrencyErrorOf(r.reason, it.subject, it.expectedSeq),
      };
    });
  }

  /** The sequence of the first event stored at or after `seq`, null when there is none. */
  async firstStoredFrom(seq: number): Promise<number | null> {
    const jsm = await this.jsm();
    // `next_by_subj` is missing from the client's MsgRequest type, not from the server.
    const query = { seq, next_by_subj: this.names.subjects.eventsAll } as unknown as MsgRequest;
    try {
      const m = await jsm.streams.getMessage(this.names.streams.events, query);
      return m?.seq ?? null;
    } catch (err: unknown) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.NoMessageFound)
        return null;
      throw err;
    }
  }

  /** The stream sequence of the subject's last event, 0 when it has none. */
  async lastSeqOf(subject: string): Promise<number> {
    const jsm = await this.jsm();
    try {
      const m = await jsm.streams.getMessage(this.names.streams.events, { last_by_subj: subject });
      return m?.seq ?? 0;
    } catch (err: unknown) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.NoMessageFound)
        return 0;
      throw err;
    }
  }

  /**
   * The sequence a reader must reach to hold every event stored now: the stream's last
   * sequence, or the last event still stored when the newest ones were purged (retention
   * purges by subject and leaves `last_seq` on a deleted message); 0 when none is stored.
   * `reached` is what the caller has read already: at or past `last_seq` nothing more is
   * looked up. One stream info read, plus one last-event read only when events were removed
   * since this store last looked and the caller is behind: the request path's cost stays
   * one read while the stream is whole, and after each purge, once per process.
   */
  async endSeq(reached = 0): Promise<number> {
    const jsm = await this.jsm();
    const { state } = await jsm.streams.info(this.names.streams.events);
    if (state.messages === 0) return 0;
    // Only removals make the stream's last sequence run ahead of its message count.
    const removed = state.last_seq - state.messages;
    if (removed === 0 || reached >= state.last_seq) return state.last_seq;
    const known = this.knownEnd;
    if (known?.removed === removed) {
      // Nothing removed since: every event after the sequence looked at then is stored.
      return state.last_seq > known.lastSeq ? state.last_seq : known.end;
    }
    const end = Math.min(await this.lastSeqOf(this.names.subjects.eventsAll), state.last_seq);
    this.knownEnd = { lastSeq: state.last_seq, removed, end };
    return end;
  }

  /**
   * Reads the stream from `fromSeq` to its end as it stands now, with an ordered consumer,
   * calling `onRecord` for each event (awaited only when it returns a promise: a callback,
   * not an async generator, since a generator costs a promise turn per event). Returns the
   * last sequence seen (`fromSeq - 1` when none). A filter that matches nothing reads
   * nothing.
   *
   * The end is the last event *stored* (endSeq, or the filter's last event), never the
   * stream's last sequence, which may name a purged event: a replay waiting for it would
   * wait for the next append. A purge while reading can still take the end away, and on
   * 2.9 a filtered purge also moves every consumer of the stream past the purged range,
   * skipping events it had not delivered yet; so a read that stands still for a while
   * looks again where the end is, and goes on from a new consumer or stops.
   */
  async replay(
    onRecord: (r: EventRecord) => void | Promise<void>,
    opts: ReadOptions = {},
  ): Promise<number> {
    const filter = opts.filter ?? this.names.subjects.eventsAll;
    let last = (opts.fromSeq ?? 1) - 1;
    const endOf = (reached: number) =>
      filter === this.names.subjects.eventsAll ? this.endSeq(reached) : this.lastSeqOf(filter);
    for (let end = await endOf(last); end > last; end = await endOf(last)) {
      const before = last;
      const read = await this.readTo(filter, last + 1, end, onRecord);
      last = read.last;
      // A read that saw nothing pending before `end` was served by a replica behind the
      // leader (a node just back): read on from there while that still brings events.
      if (!read.stalled && (last >= end || last === before)) break;
    }
    return last;
  }

  /**
   * One ordered consumer from `fromSeq` until it delivers `end`, or an event with nothing
   * pending after it (the end as the server counts it when the event left), or stands still
   * for STALL_MS while this reader waits on it (`stalled`).
   */
  private async readTo(
    filter: string,
    fromSeq: number,
    end: number,
    onRecord: (r: EventRecord) => void | Promise<void>,
  ): Promise<{ last: number; stalled: boolean }> {
    const consumer = await this.orderedConsumer({
      ...this.filterOf(filter),
      ...startOf({ fromSeq }),
    });
    const messages = await consumer.consume({ max_messages: 32_768 });
    let last = fromSeq - 1;
    let ended = false;
    let waiting = true;
    let stalled = false;
    let seen = last;
    // One timer for the whole read, not one per event: at replay speed a timer per event
    // would cost more than the event.
    const guard = setInterval(() => {
      if (waiting && seen === last) {
        stalled = true;
        void messages.close();
      }
      seen = last;
    }, STALL_MS);
    try {
      for await (const m of messages) {
        waiting = false;
        const pending = onRecord(recordOf(m));
        if (pending) await pending;
        last = m.seq;
        if (last >= end || m.info.pending === 0) {
          ended = true;
          break;
        }
        waiting = true;
      }
    } finally {
      clearInterval(guard);
      await messages.close();
    }
    return { last, stalled: stalled && !ended };
  }

  /**
   * A consumer's filter: none for the whole stream. On 2.9 a consumer filtered on the stream's
   * own wildcard that starts inside a long stream is sometimes delivered a few dozen events a
   * second (an unfiltered one, thousands of times more): a tail replay after a snapshot, or a
   * replay going on after a purge (see replay), must not crawl.
   */
  private filterOf(filter: string | undefined): { filter_subjects?: string } {
    return filter === undefined || filter === this.names.subjects.eventsAll
      ? {}
      : { filter_subjects: filter };
  }

  /** Every event of one aggregate, in order. */
  async readAggregate(subject: string): Promise<EventRecord[]> {
    const out: EventRecord[] = [];
    await this.replay(
      (r) => {
        out.push(r);
      },
      { filter: subject },
    );
    return out;
  }

  /**
   * Follows the stream live from `fromSeq` (or `fromTime`), calling `onRecord` for each event
   * as it arrives, until `close()`. `closed` resolves then, or with the error that stopped
   * it (an `onRecord` that threw, or the consumer given up). The projection loop's way in: a callback costs no promise
   * turns per event, where an async iterator costs a few.
   */
  async followEach(
    onRecord: (r: EventRecord) => void,
    opts: ReadOptions = {},
  ): Promise<{ close: () => Promise<void>; closed: Promise<void | Error> }> {
    const consumer = await this.orderedConsumer({
      ...this.filterOf(opts.filter),
      ...startOf(opts),
    });
    const { recognize } = opts;
    const messages = await consumer.consume({
      max_messages: 4096,
      // Pull requests expire after 5 s (heartbeats every 2.5 s) instead of 30 s: an ordered
      // consumer lost with a restarted server is noticed by its missed heartbeats, and until
      // then this backend's projection, and every request that syncs with it, stands still.
      expires: FOLLOW_EXPIRES_MS,
      callback: (m) => onRecord(recordOf(m, recognize)),
    });
    return {
      close: async () => {
        await messages.close();
      },
      closed: messages.closed(),
    };
  }

  /**
   * Follows the stream live from `fromSeq` (or `fromTime`): an async iterator that never ends
   * until `close()`. Used by `sonar tail`.
   */
  async follow(opts: ReadOptions = {}): Promise<{
    records: AsyncIterable<EventRecord>;
    close: () => Promise<void>;
  }> {
    const consumer = await this.orderedConsumer({
      ...this.filterOf(opts.filter),
      ...startOf(opts),
    });
    const messages = await consumer.consume({ max_messages: 4096, expires: FOLLOW_EXPIRES_MS });
    async function* records(): AsyncIterable<EventRecord> {
      for await (const m of messages) yield recordOf(m);
    }
    return {
      records: records(),
      close: async () => {
        await messages.close();
      },
    };
  }
}

/** See followEach. */
const FOLLOW_EXPIRES_MS = 5_000;

/**
 * How long a reader asks again for a consumer a backend makes: a backend reconnects within
 * seconds of a server's return, and a read that needs one waits that long, not forever.
 */
const READER_CREATE_WAIT_MS = 30_000;

/**
 * How long a replay waits on a consumer that delivers nothing before it looks again where
 * the end is (see replay): only a purge during the read makes one stand still.
 */
const STALL_MS = 1_000;

/** JetStream's err 10071 (wrong last sequence) as ConcurrencyError; any other error as is. */
function concurrencyErrorOf(err: unknown, subject: string, expectedSeq: number | undefined) {
  if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) {
    return new ConcurrencyError(subject, expectedSeq ?? -1, { cause: err });
  }
  return err;
}

function startOf(opts: ReadOptions) {
  if (opts.onlyNew) return { deliver_policy: DeliverPolicy.New };
  if (opts.fromTime !== undefined) {
    return { deliver_policy: DeliverPolicy.StartTime, opt_start_time: opts.fromTime };
  }
  if (opts.fromSeq !== undefined && opts.fromSeq > 1) {
    return { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: opts.fromSeq };
  }
  return { deliver_policy: DeliverPolicy.All };
}
