/**
 * What `sonar schedule list` and the dashboard show of a schedule: its settings, its next due
 * time and its last runs with their states. Built from a projection and a time.
 *
 * @module
 */
import type { Aggregate, Projection, ScheduleSnapshot } from '../../actors/projection.js';
import type { RefusedRun, ScheduleFire } from '../../actors/schedule/schedule.machine.js';
import { dueTimesOf } from './due-times.js';

/** A fire as listed: the run's state, when it has one. */
export interface FireInfo extends ScheduleFire {
  /**
   * The run's state (`Running`, `Succeeded`...), `Expired` once retention purged it,
   * `Submitting` while its submit is not whole yet, null for a fire that submitted no run.
   */
  runState: string | null;
}

export interface ScheduleInfo {
  name: string;
  state: string;
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
  overlap: string;
  catchUp: string;
  catchUpLimit: number;
  missedAfterMs: number;
  createdAt: string;
  /** The next due time, when Active; null when Paused, Deleted, or no due time comes again. */
  next: string | null;
  /** The last fire that submitted a run. */
  lastRun: FireInfo | null;
  /** The latest fires, latest first. */
  recent: FireInfo[];
  fires: number;
  runs: number;
  /** Fired runs the backend refused for good (`ScheduleRunRefused`), and the latest. */
  refusedRuns: number;
  lastRefused: RefusedRun | null;
  pausedAt: string | null;
}

/**
 * The next due time, or null. A schedule stored by a backend whose time zone data this one
 * lacks has none here: it is listed all the same (the firer logs it by name).
 */
function nextDueAt(c: ScheduleSnapshot['context'], after: number): string | null {
  try {
    const at = dueTimesOf(c).next(after);
    return at === null ? null : new Date(at).toISOString();
  } catch (_err: unknown) {
    return null;
  }
}

function runStateOf(p: Projection, fire: ScheduleFire): string | null {
  if (fire.skipped !== null) return null;
  const run = p.runs.get(fire.runId);
  if (run) return run.snapshot.value;
  if (p.expiredRuns.has(fire.runId)) return 'Expired';
  return 'Submitting';
}

export function scheduleInfo(
  p: Projection,
  { snapshot }: Aggregate<ScheduleSnapshot>,
  now: number,
): ScheduleInfo {
  const c = snapshot.context;
  const fire = (f: ScheduleFire): FireInfo => ({ ...f, runState: runStateOf(p, f) });
  let next: string | null = null;
  if (snapshot.value === 'Active') {
    next = nextDueAt(c, Math.max(now, Date.parse(c.cursor)));
  }
  return {
    name: c.name,
    state: snapshot.value,
    cron: c.cron,
    timezone: c.timezone,
    everyMs: c.everyMs,
    overlap: c.overlap,
    catchUp: c.catchUp,
    catchUpLimit: c.catchUpLimit,
    missedAfterMs: c.missedAfterMs,
    createdAt: c.createdAt,
    next,
    lastRun: c.lastRun && fire(c.lastRun),
    recent: c.recent.map(fire).reverse(),
    fires: c.fires,
    runs: c.runs,
    // Absent from a context an older build's snapshot restored.
    refusedRuns: (c as Partial<typeof c>).refusedRuns ?? 0,
    lastRefused: (c as Partial<typeof c>).lastRefused ?? null,
    pausedAt: c.pausedAt,
  };
}

/** Every schedule not deleted, in creation order (or the one named, deleted or not). */
export function listSchedules(p: Projection, now: number, name?: string): ScheduleInfo[] {
  if (name !== undefined) {
    const one = p.schedules.get(name);
    return one ? [scheduleInfo(p, one, now)] : [];
  }
  return [...p.schedules.values()]
    .filter((s) => s.snapshot.value !== 'Deleted')
    .map((s) => scheduleInfo(p, s, now));
}
