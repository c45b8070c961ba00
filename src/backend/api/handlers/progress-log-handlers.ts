import type { ParsedRequestOf } from '../../../protocol.js';
import { ProgressStore } from '../../../storage/task-progress.js';
import { appendLogChunk } from '../../../storage/task-logs.js';
import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import { resolveAttempt, staleError } from './attempt.js';
import type { AttemptRequest } from './attempt.js';

/**
 * `progress` and `log`: what a running attempt reports on the way. Stored outside the event
 * log (the `progress` bucket, the logs stream) and only for the attempt's holder: the current
 * attempt, Running, on the worker that asks, with its token. Nothing is appended to the log,
 * so a retried or duplicated report costs a rewrite at most.
 */
export function progressLogHandlers(ctx: BackendContext): Handlers {
  let progress: Promise<ProgressStore> | null = null;
  const progressStore = (): Promise<ProgressStore> =>
    (progress ??= ProgressStore.open(ctx.nc, ctx.names).catch((err: unknown) => {
      progress = null;
      throw err;
    }));

  /** The attempt's publish count, once the request is shown to come from its holder. */
  const heldAttempt = async (req: AttemptRequest): Promise<number> => {
    const a = await resolveAttempt(ctx, req);
    if (!a.current || a.task.value !== 'Running' || a.task.context.workerId !== req.workerId) {
      throw staleError(req, 'is not running on this worker');
    }
    return a.task.context.attempt;
  };

  return {
    progress: async (req: ParsedRequestOf<'progress'>) => {
      const attempt = await heldAttempt(req);
      await (
        await progressStore()
      ).put({
        runId: req.runId,
        taskId: req.taskId,
        attempt,
        workerId: req.workerId,
        value: req.value,
        at: new Date(ctx.now()).toISOString(),
      });
      return { runId: req.runId, taskId: req.taskId, attemptId: req.attemptId };
    },
    log: async (req: ParsedRequestOf<'log'>) => {
      const attempt = await heldAttempt(req);
      await appendLogChunk(
        ctx.js,
        ctx.names,
        { runId: req.runId, taskId: req.taskId, attempt },
        req,
      );
      return { runId: req.runId, taskId: req.taskId, attemptId: req.attemptId };
    },
  };
}
