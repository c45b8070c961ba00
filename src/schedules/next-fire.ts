/**
 * What a schedule's next `ScheduleFired` should be at `now`: a pure function of the schedule,
 * the time and whether its last run is still going. The backend's firer appends what it
 * says; the tests drive it with any `now`.
 *
 * @module
 */
import type { Projection } from '../../actors/projection.js';
import { MAX_MISSED_AFTER_MS } from '../../actors/schedule/schedule.events.js';
import type { FireSkip } from '../../actors/schedule/schedule.events.js';
import { RUN_IDS_KEPT, runIdsOf } from '../../actors/schedule/schedule.machine.js';
import type { ScheduleContext } from '../../actors/schedule/schedule.machine.js';
import { scheduledRunId } from '../../actors/schedule/schedule-run-ids.js';
import type { DueTimes } from './due-times.js';

/** The data of the `ScheduleFired` to append (a due or catch-up fire). */
export interface FireDecision {
  dueAt: string;
  runId: string;
  trigger: 'due' | 'catch-up';
  skipped?: FireSkip;
  missed: number;
}

/** Whether the log holds a run: going, ended, or expired since. */
export const isRunInLog = (p: Projection, runId: string): boolean =>
  p.runs.has(runId) || p.expiredRuns.has(runId);

/**
 * The runs a schedule fired that the log does not hold, oldest first: each is owed a submit,
 * tried again until the run exists or the backend refuses it for good (`ScheduleRunRefused`).
 */
export const owedRuns = (p: Projection, s: ScheduleContext): string[] =>
  runIdsOf(s).filter((runId) => !isRunInLog(p, runId));

/**
 * Whether a fire that submits a run would push a run still owed out of the schedule's
 * `runIds` (the oldest, once it holds {@link RUN_IDS_KEPT}): such a fire waits, so that no
 * fired run is forgotten. Its due times may pass `missedAfter` meanwhile; catch-up decides.
 */
export function isOwedFull(p: Projection, s: ScheduleContext): boolean {
  const ids = runIdsOf(s);
  return ids.length >= RUN_IDS_KEPT && !isRunInLog(p, ids[0]!);
}

/**
 * Whether a run a schedule submitted still counts as going, for `overlap: skip`: Running, or
 * owed (fired, not yet in the log: its submit is under way, or failed and is tried again). A
 * run that ended, expired since, or was refused for good does not.
 */
export function isRunOpen(p: Projection, s: ScheduleContext, runId: string): boolean {
  if (p.activeRuns.has(runId)) return true;
  return !isRunInLog(p, runId) && runIdsOf(s).includes(runId);
}

/** `missedAfterMs` as the firer reads it: a value stored before the bound is clamped. */
export const missedAfterOf = (s: ScheduleContext): number =>
  Math.min(s.missedAfterMs, MAX_MISSED_AFTER_MS);

/** What the firer knows beside the schedule and the time. */
export interface FireContext {
  /** The schedule's last run is going ({@link isRunOpen}). */
  lastRunOpen: boolean;
  /** A fire that submits a run would forget an owed one ({@link isOwedFull}): hold it. */
  owedFull?: boolean;
  /**
   * The instant due times are judged missed at, when before `now`: the time a catch-up
   * began. Its fires take time to append, and a due time that was not yet missed when it
   * began may become missed before it ends; judged at its start, one catch-up of `all` runs
   * at most `catchUpLimit` fires, and such a due time then fires as `due`.
   */
  missedAsOf?: number;
}

/**
 * The next fire of an Active schedule at `now`, or null when none is due. One at a time: the
 * firer appends it and asks again, so each judgement sees the fire before it.
 *
 * - A due time is *missed* once more than `missedAfterMs` has passed since it came (the fleet
 *   was down, or had no leader for that long). Missed due times follow `catchUp`:
 *   `none` passes over them all with one skipped fire at the latest, `last` runs only the
 *   latest, `all` runs the latest `catchUpLimit` of them, oldest first. Each such fire says in
 *   `missed` how many due times before it got no run.
 * - A due time not yet missed fires as `due`, oldest first: a failover shorter than
 *   `missedAfterMs` neither skips one nor fires one twice (the machine refuses any due time at
 *   or before the cursor).
 * - `overlap: skip` turns a fire into a skipped one while the schedule's last run is open.
 * - A fire that would submit a run waits (null) while `owedFull`.
 * - `missedAfterMs` is read clamped to {@link MAX_MISSED_AFTER_MS}, so the due times one
 *   judgement walks are bounded, whatever a stored schedule says.
 */
export function nextFire(
  s: ScheduleContext,
  now: number,
  due: DueTimes,
  { lastRunOpen, owedFull = false, missedAsOf = now }: FireContext,
): FireDecision | null {
  const cursor = Date.parse(s.cursor);
  // Missed: missedAsOf - dueAt > missedAfterMs, in whole milliseconds.
  const missedUntil = Math.min(now, missedAsOf) - missedAfterOf(s) - 1;
  const missed = due.between(cursor, missedUntil, s.catchUpLimit);
  let decision: Omit<FireDecision, 'runId' | 'dueAt'> & { at: number };
  if (missed.count > 0) {
    const latest = missed.latest[missed.latest.length - 1]!;
    if (s.catchUp === 'none') {
      decision = { at: latest, trigger: 'catch-up', skipped: 'catch-up', missed: missed.count - 1 };
    } else if (s.catchUp === 'last') {
      decision = { at: latest, trigger: 'catch-up', missed: missed.count - 1 };
    } else {
      const oldest = missed.latest[0]!;
      decision = { at: oldest, trigger: 'catch-up', missed: missed.count - missed.latest.length };
    }
  } else {
    const next = due.next(cursor);
    if (next === null || next > now) return null;
    decision = { at: next, trigger: 'due', missed: 0 };
  }
  if (decision.skipped === undefined && s.overlap === 'skip' && lastRunOpen) {
    decision.skipped = 'overlap';
  }
  if (decision.skipped === undefined && owedFull) return null;
  const { at, ...rest } = decision;
  return { dueAt: new Date(at).toISOString(), runId: scheduledRunId(s.name, at), ...rest };
}
