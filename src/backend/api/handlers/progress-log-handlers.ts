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
 * attempt, Running, on the worker that asks, with its token. Nothing is appended to the event
 * log. A retried progress rewrites the same value; a retried log chunk carries its number,
 * which the stream dedupes.
 */
export function progressLogHandlers(ctx: BackendContext): Handlers {
  let progress: Promise<ProgressStore> | null = null;
  const progressStore = (): Promise<ProgressStore> =>
    (progress ??= ProgressStore.open(ctx.nc, ctx.names).catch((err: unknown) => {
      progress = null;
      throw err;
    }));

  /**
   * The attempt's publish count, once the request is shown to come from its holder. Judged
   * on the projection as it stands, and only when that does not show the attempt held by the
   * asker, again after catching up with the log: most reports need no read of the stream.
   */
  const heldAttempt = async (req: AttemptRequest): Promise<number> => {
    const held = async (synced: boolean): Promise<number | null> => {
      const a = await resolveAttempt(ctx, req, { synced });
      const t = a.task;
      const ok = a.current && t.value === 'Running' && t.context.workerId === req.workerId;
      return ok ? t.context.attempt : null;
    };
    const attempt = (await held(true).catch(() => null)) ?? (await held(false));
    if (attempt === null) throw staleError(req, 'is not running on this worker');
    return attempt;
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
        { runId: req.runId, taskId: req.taskId, attempt, attemptId: req.attemptId },
        req,
      );
      return { runId: req.runId, taskId: req.taskId, attemptId: req.attemptId };
    },
  };
}
