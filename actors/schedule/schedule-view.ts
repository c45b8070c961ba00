import type { ScheduleContext } from './schedule.machine.js';

/** One schedule in `sonar replay --json`. */
export interface ScheduleView {
  state: string;
  /** Due times at or before this are handled. */
  cursor: string;
  /** `ScheduleFired` events, and how many submitted a run. */
  fires: number;
  runs: number;
  lastRunId: string | null;
}

export const scheduleView = (state: unknown, c: ScheduleContext): ScheduleView => ({
  state: String(state),
  cursor: c.cursor,
  fires: c.fires,
  runs: c.runs,
  lastRunId: c.lastRun?.runId ?? null,
});
