import type { Projection } from '../../actors/projection.js';
import type { RunState } from '../../actors/run/run.machine.js';
import type { StepState } from '../../actors/step/step.machine.js';
import type { TaskState } from '../../actors/task/task.machine.js';

/** A run as its events tell it (`status`, `watch`, `wait`). */
export interface RunStatus {
  runId: string;
  /** Null while the run is not (fully) submitted. */
  state: RunState | null;
  /** When it reached Succeeded, Failed or Cancelled; null before. */
  endedAt: string | null;
  /** Why it Failed or was Cancelled, when its last event says. */
  reason: string | null;
  taskCount: number;
  /** Each step's state, by step id. */
  steps: Record<string, StepState>;
  /** Tasks per state, e.g. `{ Pending: 3, Succeeded: 7 }`; states with none are left out. */
  tasks: Partial<Record<TaskState, number>>;
}

/** The states a run does not leave. */
export const ENDED_RUN_STATES: ReadonlySet<RunState> = new Set([
  'Succeeded',
  'Failed',
  'Cancelled',
]);

export const isRunEnded = (s: RunStatus): boolean =>
  s.state !== null && ENDED_RUN_STATES.has(s.state);

/** The status of `runId` in a projection folded from (at least) that run's events. */
export function runStatusOf(p: Projection, runId: string): RunStatus {
  const run = p.runs.get(runId)?.snapshot;
  const steps: Record<string, StepState> = {};
  const prefix = `${runId}.`;
  for (const [key, s] of p.steps) {
    if (key.startsWith(prefix)) steps[key.slice(prefix.length)] = s.snapshot.value as StepState;
  }
  const tasks: Partial<Record<TaskState, number>> = {};
  let seen = 0;
  for (const [key, t] of p.tasks) {
    if (!key.startsWith(prefix)) continue;
    const state = t.snapshot.value as TaskState;
    tasks[state] = (tasks[state] ?? 0) + 1;
    seen++;
  }
  return {
    runId,
    state: (run?.value as RunState | undefined) ?? null,
    endedAt: run?.context.endedAt ?? null,
    reason: run?.context.reason ?? null,
    taskCount: run?.context.taskCount ?? seen,
    steps,
    tasks,
  };
}
