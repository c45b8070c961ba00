import type { Aggregate, TaskSnapshot } from '../../../actors/projection.js';
import { dispatchRefOf } from '../../../streams/queues.js';
import type { BackendContext } from '../context.js';
import { deleteIfThere, scanStream } from '../storage/index.js';
import { caughtUpTask } from './task-catch-up.js';

/** What the stale-dispatch repair found and did. */
export interface StaleDispatchReport {
  /** Dispatch messages looked at. */
  checked: number;
  /** Deleted: their attempt is no longer the task's current one (or they are not a task). */
  purged: number;
}

/** Published (waiting for a worker) or Running (started, its ack on the way) with this attempt. */
function isCurrent(entry: Aggregate<TaskSnapshot> | undefined, attemptId: string): boolean {
  if (!entry) return false;
  const { value, context } = entry.snapshot;
  return (value === 'Published' || value === 'Running') && context.attemptId === attemptId;
}

/**
 * Deletes dispatch messages whose attempt is no longer current: the task was requeued,
 * cancelled or finished while its message waited in `dispatch_<tag>` (or on a tag no worker
 * pulls any more). A worker would get `stale_attempt` from `start` and drop it anyway; the
 * sweep spares it the trip and keeps the work queue to what can still run. A message that
 * cannot be parsed is deleted too: workers terminate it unread.
 */
export async function purgeStaleDispatches(ctx: BackendContext): Promise<StaleDispatchReport> {
  const report: StaleDispatchReport = { checked: 0, purged: 0 };
  const stream = ctx.names.streams.dispatch;
  for await (const m of scanStream(ctx.jsm, stream, ctx.names.subjects.dispatchAll)) {
    report.checked++;
    const body = dispatchRefOf(m);
    if (body) {
      const key = `${body.runId}.${body.taskId}`;
      if (isCurrent(ctx.loop.projection.tasks.get(key), body.attemptId)) continue;
      // Maybe only newer than this projection: judge again on the task's last event.
      if (isCurrent(await caughtUpTask(ctx, body.runId, body.taskId), body.attemptId)) continue;
    }
    if (await deleteIfThere(ctx.jsm, stream, m.seq)) report.purged++;
  }
  return report;
}
