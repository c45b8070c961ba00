import type { Projection } from '../../../actors/projection.js';
import { TASK_STATES } from '../../../actors/task/task.machine.js';
import type { TaskState } from '../../../actors/task/task.machine.js';

export { TASK_STATES };

/** Tasks per state, from the per-step counts: a walk of the steps, never of the tasks. */
export function tasksByState(p: Projection, runId?: string): Record<TaskState, number> {
  const out = Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as Record<TaskState, number>;
  for (const [key, index] of p.stepIndex) {
    if (runId !== undefined && !key.startsWith(`${runId}.`)) continue;
    for (const s of TASK_STATES) out[s] += index.counts[s];
  }
  return out;
}
