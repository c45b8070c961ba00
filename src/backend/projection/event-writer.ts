import { evaluate } from '../../../actors/projection.js';
import type { Projection } from '../../../actors/projection.js';
import { decodeEvent, parseEventSubject } from '../../../actors/events.js';
import type { SonarEvent } from '../../../actors/events.js';
import { IllegalTransitionError, ValidationError } from '../../../actors/errors.js';
import { encodeEnvelope } from '../../../streams/envelope.js';
import type { AppendItem, EventStore } from '../../../streams/event-store.js';
import { ConcurrencyError } from '../../../streams/errors.js';
import { newId } from '../../ids.js';
import type { ProjectionLoop } from './projection-loop.js';

/** An event to write: its type and data; the id is minted unless given (for idempotence). */
export interface Command {
  subject: string;
  type: SonarEvent['type'];
  data: unknown;
  /** The event id and Nats-Msg-Id: a retried write with the same id is stored once. */
  id?: string;
}

export interface Written {
  seq: number;
  /** The server already held this event id: nothing new was stored. */
  duplicate: boolean;
}

/** What a Nats-Msg-Id header value may hold here: printable ASCII, no space. */
const MSG_ID = /^[\x21-\x7e]{1,512}$/;

/** Retries after a lost race: reload (wait for the loop), re-judge, at most twice (STYLE C4). */
const MAX_CONFLICT_RETRIES = 2;

/**
 * The backend's write path (STYLE C4): judge the event against the projection with the
 * machine (a refused event throws IllegalTransitionError and is never written), append with
 * the aggregate's last sequence as the expectation, then wait until the projection loop has
 * applied it. On ConcurrencyError another writer won: wait for the loop to see that write,
 * re-judge, and try again, at most twice; never overwrite.
 */
export class EventWriter {
  private locks = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: EventStore,
    private readonly loop: ProjectionLoop,
  ) {}

  get projection(): Projection {
    return this.loop.projection;
  }

  /** Writes one event; per subject, writes from this process are serialized. */
  write(cmd: Command): Promise<Written> {
    const prev = this.locks.get(cmd.subject) ?? Promise.resolve();
    const next = prev.then(
      () => this.writeNow(cmd),
      () => this.writeNow(cmd),
    );
    this.locks.set(cmd.subject, next);
    const release = () => {
      if (this.locks.get(cmd.subject) === next) this.locks.delete(cmd.subject);
    };
    // then(release, release), not finally(): a refused write must not also surface as an
    // unhandled rejection of the cleanup promise (which would end the process).
    void next.then(release, release);
    return next;
  }

  /**
   * Judges and appends many events to distinct aggregates, pipelined, without waiting on the
   * loop for each: for bulk writes (submit). Refused events are reported, not written. Each
   * payload is registered in the loop's OwnWrites, so the loop applies the event judged here
   * instead of parsing and validating it again when the stream delivers it back.
   */
  async writeMany(cmds: Command[]): Promise<PromiseSettledResult<Written>[]> {
    const own = this.loop.ownWrites;
    // Every event is judged before any is appended: one refusal throws for the whole batch.
    const items = cmds.map((cmd): AppendItem => {
      const { event, seq } = this.judge(cmd);
      const stored = { id: cmd.id ?? newId(), type: event.type, data: event.data };
      return {
        subject: cmd.subject,
        event: stored,
        expectedSeq: seq,
        payload: encodeEnvelope(stored),
      };
    });
    // Registered before publishing: the loop may see an event before its ack comes back.
    for (const it of items) own.expect(it.subject, it.payload!, it.event);
    let last = 0;
    try {
      const results = await this.store.appendMany(items);
      for (const r of results) {
        if (r.status === 'fulfilled' && r.value.seq > last) last = r.value.seq;
      }
      await this.loop.waitFor(last);
      return results;
    } finally {
      // Applied by now, or never delivered (refused, duplicate, timed out): drop what is left.
      for (const it of items) own.forget(it.subject, it.payload!);
    }
  }

  private judge(cmd: Command) {
    const ref = parseEventSubject(cmd.subject);
    if (!ref) throw new ValidationError(`not an event subject: ${cmd.subject}`);
    // The id travels as the Nats-Msg-Id header, whose value nats.js refuses to build with a
    // CR or LF (a throw that is no refusal). Requests are validated before they get here; this
    // keeps any id built from a field missed there a `validation` refusal too.
    if (cmd.id !== undefined && !MSG_ID.test(cmd.id)) {
      throw new ValidationError(
        `event id ${JSON.stringify(cmd.id.slice(0, 300))} cannot be a Nats-Msg-Id (printable ASCII without spaces, at most 512 characters)`,
      );
    }
    // The time is the server's; a placeholder serves for judging, since guards never read it.
    const decoded = decodeEvent(cmd.type, cmd.data, '1970-01-01T00:00:00.000Z');
    if (!decoded.ok) throw new ValidationError(decoded.error.message);
    const { seq } = evaluate(this.projection, ref, decoded.value);
    return { cmd, ref, event: decoded.value, seq };
  }

  /** Judges again after a lost race: a refusal then names the race as its cause. */
  private judgeAfter(cmd: Command, lost: ConcurrencyError) {
    try {
      return this.judge(cmd);
    } catch (err: unknown) {
      if (!(err instanceof IllegalTransitionError)) throw err;
      throw new IllegalTransitionError(err.machine, err.state, err.eventType, { cause: lost });
    }
  }

  /** Writes one event, registered in OwnWrites as writeMany's are (one per subject at a time). */
  private async writeNow(cmd: Command): Promise<Written> {
    const id = cmd.id ?? newId();
    const own = this.loop.ownWrites;
    let lost: ConcurrencyError | undefined;
    for (let attempt = 0; ; attempt++) {
      const { event, seq } = lost ? this.judgeAfter(cmd, lost) : this.judge(cmd);
      const stored = { id, type: event.type, data: event.data };
      const payload = encodeEnvelope(stored);
      own.expect(cmd.subject, payload, stored);
      try {
        const ack = await this.store.append(cmd.subject, stored, { expectedSeq: seq, payload });
        await this.loop.waitFor(ack.seq);
        return ack;
      } catch (err: unknown) {
        if (!(err instanceof ConcurrencyError) || attempt >= MAX_CONFLICT_RETRIES) throw err;
        lost = err;
        await this.loop.waitFor(await this.store.lastSeqOf(cmd.subject));
      } finally {
        own.forget(cmd.subject, payload);
      }
    }
  }
}
