import { ErrorCode, SonarError } from '../../actors/errors.js';
import { DEFAULT_PRIORITY } from '../../actors/priority.js';
import type { Projection } from '../../actors/projection.js';
import type { RunFile } from '../protocol.js';

type StepInFile = RunFile['steps'][number];
type TaskInFile = StepInFile['tasks'][number];

const sameTags = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((t, i) => t === b[i]);

/**
 * The run file of `sonar rerun RUN --failed --as NEWRUN` (DESIGN.md section 8): the tasks of
 * a finished run that did not succeed (Failed, Dead, Cancelled, Poisoned, or never run because
 * their step was skipped), with their steps' settings, commands and inputs as submitted. A
 * step left with no task is dropped, and so is its name from other steps' `after`: it
 * succeeded, so nothing waits for it any more. Priorities and retry policies carry over;
 * delays do not: a rerun is asked for now.
 *
 * @throws SonarError `not_found` for an unknown run, `conflict` while it still runs (its tasks
 *   would run twice), `validation` when every task succeeded.
 */
export function rerunFile(p: Projection, runId: string, newRunId: string): RunFile {
  const run = p.runs.get(runId)?.snapshot;
  if (!run && p.expiredRuns.has(runId)) {
    throw new SonarError(
      ErrorCode.NotFound,
      `run ${runId} expired (SONAR_RETENTION): only its summary is kept, not its tasks`,
      { runId },
    );
  }
  if (!run) throw new SonarError(ErrorCode.NotFound, `no run ${runId}`, { runId });
  if (run.value === 'Running') {
    throw new SonarError(
      ErrorCode.Conflict,
      `run ${runId} is still Running: wait for it to end, or cancel it first (sonar cancel ${runId})`,
      { runId, state: run.value },
    );
  }
  const steps: StepInFile[] = [];
  for (const stepId of run.context.stepIds) {
    const step = p.steps.get(`${runId}.${stepId}`)?.snapshot.context;
    if (!step) continue;
    const tasks: TaskInFile[] = [];
    for (const key of p.stepTasks.get(`${runId}.${stepId}`) ?? []) {
      const t = p.tasks.get(key)!.snapshot;
      if (t.value === 'Succeeded') continue;
      const s = t.context.spec;
      tasks.push({
        id: s.taskId,
        ...(s.command !== undefined && { command: s.command }),
        ...(s.input !== undefined && { input: s.input }),
        maxAttempts: s.maxAttempts,
        ...(!sameTags(s.tags, step.tags) && { tags: s.tags }),
        ...(s.priority !== undefined && { priority: s.priority }),
      });
    }
    if (tasks.length === 0) continue;
    steps.push({
      id: stepId,
      tags: step.tags,
      ...(step.maxConcurrent !== null && { maxConcurrent: step.maxConcurrent }),
      after: step.after,
      output: step.output,
      ...(step.timeoutMs !== null && { timeoutMs: step.timeoutMs }),
      ...(step.priority !== DEFAULT_PRIORITY && { priority: step.priority }),
      ...(step.retry !== null && {
        retry: {
          maxAttempts: step.retry.maxAttempts,
          backoff: step.retry.backoff,
          initial: step.retry.initialMs,
          max: step.retry.maxMs,
          jitter: step.retry.jitter,
        },
      }),
      tasks,
    });
  }
  if (steps.length === 0) {
    throw new SonarError(
      ErrorCode.Validation,
      `every task of run ${runId} succeeded: nothing to rerun`,
      { runId },
    );
  }
  const kept = new Set(steps.map((s) => s.id));
  for (const s of steps) s.after = (s.after ?? []).filter((id) => kept.has(id));
  return { runId: newRunId, steps };
}
