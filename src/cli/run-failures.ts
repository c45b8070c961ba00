import type { Projection } from '../../actors/projection.js';
import { isUnsuccessfulTaskState } from '../../actors/task/task.machine.js';
import type { EventStore } from '../../streams/event-store.js';
import { paint } from '../display/output.js';

/** A task of a run that did not succeed, and why. */
export interface TaskFailure {
  /** `<stepId>.<taskId>` */
  task: string;
  state: string;
  /** The last failed attempt's exit code (-1: no process ran), when it failed by attempts. */
  exitCode: number | null;
  /** The task's last error: the command's stderr tail, `dead: ...`, `cancelled: ...`. */
  error: string | null;
}

/**
 * The tasks of `runId` that did not succeed (Failed, Dead, Cancelled, Poisoned), in run-file
 * order, with the exit code of the last failed attempt read from the task's own events (the
 * projection keeps the error, not the code). Reads at most `limit` tasks' events.
 */
export async function runFailures(
  p: Projection,
  store: EventStore,
  runId: string,
  limit = 10,
): Promise<{ failures: TaskFailure[]; more: number }> {
  const keys: string[] = [];
  for (const stepId of p.runs.get(runId)?.snapshot.context.stepIds ?? []) {
    for (const key of p.stepTasks.get(`${runId}.${stepId}`) ?? []) {
      if (isUnsuccessfulTaskState(p.tasks.get(key)!.snapshot.value)) keys.push(key);
    }
  }
  const failures = await Promise.all(
    keys.slice(0, limit).map(async (key): Promise<TaskFailure> => {
      const t = p.tasks.get(key)!.snapshot;
      const events = await store.readAggregate(
        store.names.subjects.task(runId, t.context.spec.taskId),
      );
      const failed = events.filter((e) => e.type === 'TaskAttemptFailed').at(-1);
      const exitCode = (failed?.data as { exitCode?: number } | undefined)?.exitCode ?? null;
      return {
        task: `${t.context.spec.stepId}.${t.context.spec.taskId}`,
        state: t.value,
        exitCode: t.value === 'Failed' ? exitCode : null,
        error: t.context.error,
      };
    }),
  );
  return { failures, more: Math.max(0, keys.length - limit) };
}

/** `  build.t3  Failed  exit 3: <first line of the error>` */
export function failureLines(
  runId: string,
  report: { failures: TaskFailure[]; more: number },
  color: boolean,
): string[] {
  const width = Math.max(4, ...report.failures.map((f) => f.task.length));
  const lines = report.failures.map((f) => {
    const code = f.exitCode === null ? '' : `exit ${f.exitCode}: `;
    const why = (f.error ?? '').trim().split('\n').slice(-3).join(' | ');
    return `  ${f.task.padEnd(width)}  ${paint(color, 'red', f.state.padEnd(9))}  ${code}${why}`;
  });
  if (report.more > 0) lines.push(`  ... and ${report.more} more (sonar status --run ${runId})`);
  return lines;
}
