import { IllegalTransitionError } from '../../../actors/errors.js';
import { decodeEvent } from '../../../actors/events.js';
import { aggregateOf, evaluate } from '../../../actors/projection.js';
import type { ReconcilerEvent } from '../../../actors/reconciler/decisions.js';
import type { EventStore } from '../../../streams/event-store.js';
import { ConcurrencyError } from '../../../streams/errors.js';
import { aggregateSubject } from '../../../streams/names.js';
import type { Names } from '../../../streams/names.js';
import { newId } from '../../ids.js';
import type { ProjectionLoop } from './projection-loop.js';

/**
 * What became of one decision: appended, or dropped because the aggregate `moved` since it
 * was judged (seen locally), the machine `refused` it, or another writer won the race
 * (`conflict`, seen by the server). Dropped decisions are judged afresh next tick.
 */
export type DecisionOutcome = 'written' | 'moved' | 'refused' | 'conflict';

/**
 * Appends the reconciler's decisions, each only onto the exact state it was judged on.
 *
 * Why not EventWriter.write: on a lost race it re-judges the event against the *new* state
 * and retries. That is right for a request (a worker's `start`), wrong for a judgement: a
 * publish timeout decided on a Published task is still accepted by the machine once the task
 * has started (same attemptId), and would requeue a task that is now running. Here the
 * expected sequence is the one the decision was taken on, and any move drops the decision.
 * Like EventWriter it judges with the machine first and waits for the projection to catch up.
 */
export class DecisionWriter {
  constructor(
    private readonly store: EventStore,
    private readonly loop: ProjectionLoop,
    private readonly names: Names,
  ) {}

  async write(e: ReconcilerEvent): Promise<DecisionOutcome> {
    const p = this.loop.projection;
    if ((aggregateOf(p, e.ref)?.seq ?? 0) !== e.seq) return 'moved';
    // Guards never read the time; the server stamps the real one.
    const decoded = decodeEvent(e.type, e.data, '1970-01-01T00:00:00.000Z');
    if (!decoded.ok) throw decoded.error; // a bug in the pure core, not a state to skip
    try {
      evaluate(p, e.ref, decoded.value);
    } catch (err: unknown) {
      if (err instanceof IllegalTransitionError) return 'refused';
      throw err;
    }
    let seq: number;
    try {
      const ack = await this.store.append(
        aggregateSubject(this.names, e.ref),
        { id: newId(), type: e.type, data: e.data },
        { expectedSeq: e.seq },
      );
      seq = ack.seq;
    } catch (err: unknown) {
      if (err instanceof ConcurrencyError) return 'conflict';
      throw err;
    }
    await this.loop.waitFor(seq);
    return 'written';
  }
}
