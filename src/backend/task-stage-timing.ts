import type { TaskContext } from '../../actors/task/task.machine.js';
import { signalMetric } from '../metrics.js';
import type { TaskStage } from '../metrics.js';
import type { Written } from './projection/index.js';

/**
 * Reports how long a task spent in the state this backend's write just moved it out of:
 * `before` is the task as judged for the write, `endMs` when the move happened (the new
 * state's `since` where there is one: the server's time, like `before.since`). A duplicate
 * write stored nothing, so it reports nothing: another backend's write was the move.
 */
export function reportStage(
  nodeId: string,
  stage: TaskStage,
  before: Pick<TaskContext, 'since' | 'tag'>,
  written: Written,
  endMs: number | null,
): void {
  if (written.duplicate || before.since === null || before.tag === null || endMs === null) return;
  const ms = endMs - Date.parse(before.since);
  if (!Number.isFinite(ms)) return;
  signalMetric({ kind: 'task-stage', nodeId, stage, tag: before.tag, ms: Math.max(0, ms) });
}
