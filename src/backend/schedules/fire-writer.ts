import { IllegalTransitionError } from '../../../actors/errors.js';
import { decodeEvent } from '../../../actors/events.js';
import { evaluate } from '../../../actors/projection.js';
import { compactTime } from '../../../actors/schedule/schedule-run-ids.js';
import { ConcurrencyError } from '../../../streams/errors.js';
import type { FireDecision } from '../../schedules/next-fire.js';
import type { BackendContext } from '../context.js';

/** What became of one fire: appended, or dropped (judged afresh on the next check). */
export type FireOutcome = 'written' | 'moved' | 'refused' | 'conflict';

/**
 * Appends one `ScheduleFired`, only onto the exact state of the schedule it was judged on:
 * the expected sequence is the one the decision saw, so of two backends that judged the same
 * due time (a leader that lost its lock without knowing it, and its successor) one append
 * lands and the other is refused by the server. The event id names the due time, so a
 * retried publish is stored once as well. That event is the proof the due time was handled.
 */
export async function writeFire(
  ctx: BackendContext,
  name: string,
  judgedSeq: number,
  fire: FireDecision,
): Promise<FireOutcome> {
  const p = ctx.loop.projection;
  if ((p.schedules.get(name)?.seq ?? 0) !== judgedSeq) return 'moved';
  const ref = { kind: 'schedule', key: name } as const;
  // Guards never read the time; the server stamps the real one.
  const decoded = decodeEvent('ScheduleFired', fire, '1970-01-01T00:00:00.000Z');
  if (!decoded.ok) throw decoded.error; // a bug in next-fire.ts, not a state to skip
  try {
    evaluate(p, ref, decoded.value);
  } catch (err: unknown) {
    if (err instanceof IllegalTransitionError) return 'refused';
    throw err;
  }
  try {
    const ack = await ctx.store.append(
      ctx.names.subjects.schedule(name),
      {
        id: `fire.${name}.${compactTime(Date.parse(fire.dueAt))}`,
        type: 'ScheduleFired',
        data: decoded.value.data,
      },
      { expectedSeq: judgedSeq },
    );
    await ctx.loop.waitFor(ack.seq);
    return ack.duplicate ? 'conflict' : 'written';
  } catch (err: unknown) {
    if (err instanceof ConcurrencyError) return 'conflict';
    throw err;
  }
}
