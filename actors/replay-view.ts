import type { Projection } from './projection.js';
import type { Skipped } from './replay.js';
import { scheduleView } from './schedule/schedule-view.js';
import type { ScheduleView } from './schedule/schedule-view.js';

/** `sonar replay --json` (DESIGN.md section 8). */
export interface ReplayView {
  tasks: Record<
    string,
    {
      state: string;
      attempt: number;
      attemptId: string | null;
      tag: string | null;
      workerId: string | null;
      recoveries: number;
    }
  >;
  steps: Record<string, { state: string; starved: boolean }>;
  /** Runs evicted by `RunExpired` come last, with `expired: true`. */
  runs: Record<string, { state: string; expired?: true }>;
  workers: Record<string, { state: string }>;
  /** Only when the log holds a schedule: older views stay byte-identical. */
  schedules?: Record<string, ScheduleView>;
  skipped: Skipped[];
}

/** Puts `schedules` before `skipped`, and only when there is one. */
export function withSchedules(
  view: ReplayView,
  schedules: Iterable<readonly [string, ScheduleView]>,
): ReplayView {
  const entries = [...schedules];
  if (entries.length === 0) return view;
  const { skipped, ...rest } = view;
  return { ...rest, schedules: Object.fromEntries(entries), skipped };
}

/** The public view of a projection, keys in insertion (event) order. */
export function replayView(p: Projection, skipped: Skipped[]): ReplayView {
  const view: ReplayView = { tasks: {}, steps: {}, runs: {}, workers: {}, skipped };
  for (const [key, { snapshot }] of p.tasks) {
    const c = snapshot.context;
    view.tasks[key] = {
      state: String(snapshot.value),
      attempt: c.attempt,
      attemptId: c.attemptId,
      tag: c.tag,
      workerId: c.workerId,
      recoveries: c.recoveries,
    };
  }
  for (const [key, { snapshot }] of p.steps) {
    view.steps[key] = { state: String(snapshot.value), starved: snapshot.context.starved };
  }
  for (const [key, { snapshot }] of p.runs) view.runs[key] = { state: String(snapshot.value) };
  for (const [key, run] of p.expiredRuns) view.runs[key] = { state: run.state, expired: true };
  for (const [key, { snapshot }] of p.workers)
    view.workers[key] = { state: String(snapshot.value) };
  return withSchedules(
    view,
    [...p.schedules].map(([name, { snapshot }]) => [
      name,
      scheduleView(snapshot.value, snapshot.context),
    ]),
  );
}
