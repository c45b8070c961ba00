/**
 * A finished one-step run written event by event through a test backend's writer (each
 * judged by its machine), as retention and the read-only verbs' tests need one: every task
 * succeeds on worker `w1`, except the last `failed`, which fail for good (the run then
 * Failed).
 */
import type { TestBackend } from './test-backend.js';

const HASH = 'c'.repeat(64);
/** Each task's input: big enough that a projection holding it is easy to tell. */
export const FINISHED_RUN_INPUT = { payload: 'x'.repeat(10_000) };

export async function finishedRun(
  w: TestBackend,
  runId: string,
  tasks: number,
  { failed = 0 }: { failed?: number } = {},
): Promise<void> {
  const n = w.ctx.names;
  const ids = Array.from({ length: tasks }, (_, i) => `t${i}`);
  const failing = new Set(ids.slice(tasks - failed));
  await w.write(n.subjects.step(runId, 's1'), 'StepCreated', {
    runId,
    stepId: 's1',
    tags: ['linux'],
    after: [],
    taskCount: tasks,
  });
  for (const taskId of ids) {
    await w.write(n.subjects.task(runId, taskId), 'TaskCreated', {
      runId,
      stepId: 's1',
      taskId,
      tags: ['linux'],
      input: FINISHED_RUN_INPUT,
      ...(failing.has(taskId) && { command: ['false'], maxAttempts: 1 }),
    });
  }
  await w.write(n.subjects.run(runId), 'RunSubmitted', {
    runId,
    stepIds: ['s1'],
    taskCount: tasks,
  });
  for (const taskId of ids) {
    const subject = n.subjects.task(runId, taskId);
    const attemptId = `${runId}-${taskId}-a1`;
    await w.write(subject, 'TaskPublished', {
      attempt: 1,
      attemptId,
      tokenHash: HASH,
      tag: 'linux',
    });
    await w.write(subject, 'TaskStarted', { attemptId, workerId: 'w1' });
    if (failing.has(taskId)) {
      await w.write(subject, 'TaskAttemptFailed', {
        attemptId,
        workerId: 'w1',
        exitCode: 1,
        error: 'exit 1',
        retryable: false,
      });
      continue;
    }
    await w.write(subject, 'TaskResultAccepted', {
      attemptId,
      workerId: 'w1',
      outputRef: 'inline',
      outputBytes: 2,
      outputInline: 'e30=',
    });
    await w.write(subject, 'TaskFinalized', { attemptId, resultKey: `${runId}.${taskId}` });
  }
  if (failed === 0) {
    await w.write(n.subjects.step(runId, 's1'), 'StepSucceeded', {});
    await w.write(n.subjects.run(runId), 'RunSucceeded', {});
    return;
  }
  await w.write(n.subjects.step(runId, 's1'), 'StepFailed', {
    reason: 'tasks failed',
    taskIds: [...failing],
  });
  await w.write(n.subjects.run(runId), 'RunFailed', { reason: 'step s1 failed' });
}
