import type { Aggregate, TaskSnapshot } from '../../../actors/projection.js';
import type { BackendContext } from '../context.js';

/**
 * The task as the projection holds it once it has applied the task's last stored event. A
 * sweep judges work-queue messages against the projection; a message that looks stale may
 * only be newer than what this process has applied (another backend published it), so the
 * projection catches up with that one subject before anything is deleted.
 */
export async function caughtUpTask(
  ctx: Pick<BackendContext, 'loop' | 'store' | 'names'>,
  runId: string,
  taskId: string,
): Promise<Aggregate<TaskSnapshot> | undefined> {
  const subject = ctx.names.subjects.task(runId, taskId);
  await ctx.loop.waitFor(await ctx.store.lastSeqOf(subject));
  return ctx.loop.projection.tasks.get(`${runId}.${taskId}`);
}
