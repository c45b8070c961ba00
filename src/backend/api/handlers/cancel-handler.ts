import { ErrorCode, IllegalTransitionError, SonarError } from '../../../../actors/errors.js';
import { keyOf } from '../../../../actors/ids.js';
import { isOpenTaskState } from '../../../../actors/projection.js';
import { UNFINISHED_STEP_STATES } from '../../../../actors/step/step.machine.js';
import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import type { Command } from '../../projection/index.js';
import { syncAll } from './sync.js';
import { countWritten, writeAll } from './write-all.js';

const encoder = new TextEncoder();

/**
 * `cancel` (DESIGN.md section 6): a whole run (`RunCancelled`, then `TaskCancelled` for every
 * open task and `StepSkipped` for every unfinished step) or one task (`TaskCancelled`). Then
 * `<prefix>.control.cancel` tells workers to abort what they run of it.
 *
 * `RunCancelled` goes first, so that nothing more is dispatched while the tasks are being
 * cancelled; a cancel cut short is completed by sending it again (a Cancelled run goes on to
 * its tasks and steps), so the request is idempotent.
 */
export function cancelHandlers(ctx: BackendContext): Handlers {
  const { names: n, writer } = ctx;
  const p = () => ctx.loop.projection;

  const notFound = (what: string, details: Record<string, unknown>) =>
    new SonarError(ErrorCode.NotFound, `no ${what}`, details);

  return {
    cancel: async (req) => {
      await syncAll(ctx);
      const run = p().runs.get(req.runId)?.snapshot;
      if (!run) throw notFound(`run ${req.runId}`, { runId: req.runId });
      let cancelled = 0;
      if (req.taskId !== undefined) {
        const task = p().tasks.get(keyOf(req.runId, req.taskId))?.snapshot;
        if (!task) {
          throw notFound(`task ${req.runId}.${req.taskId}`, {
            runId: req.runId,
            taskId: req.taskId,
          });
        }
        if (isOpenTaskState(task.value)) {
          cancelled = countWritten(
            await writeAll(writer, [taskCancelled(req.runId, req.taskId, req.reason)]),
          );
        }
      } else {
        if (run.value === 'Running') {
          try {
            await writer.write({
              subject: n.subjects.run(req.runId),
              type: 'RunCancelled',
              data: { reason: req.reason },
              id: `cancel.${req.runId}`,
            });
          } catch (err: unknown) {
            if (!(err instanceof IllegalTransitionError)) throw err;
          }
        }
        const now = p().runs.get(req.runId)?.snapshot.value;
        if (now !== 'Cancelled') throw new IllegalTransitionError('run', now, 'RunCancelled');
        const tasks: Command[] = [];
        const steps: Command[] = [];
        for (const stepId of run.context.stepIds) {
          for (const key of p().stepTasks.get(keyOf(req.runId, stepId)) ?? []) {
            const task = p().tasks.get(key)?.snapshot;
            if (task && isOpenTaskState(task.value)) {
              tasks.push(taskCancelled(req.runId, task.context.spec.taskId, req.reason));
            }
          }
          const step = p().steps.get(keyOf(req.runId, stepId))?.snapshot;
          if (step && UNFINISHED_STEP_STATES.has(step.value)) {
            steps.push({
              subject: n.subjects.step(req.runId, stepId),
              type: 'StepSkipped',
              data: { reason: `run cancelled: ${req.reason}` },
            });
          }
        }
        cancelled = countWritten(await writeAll(writer, tasks));
        await writeAll(writer, steps);
      }
      // Core NATS, fire and forget: a worker that misses it finds out at its next report.
      ctx.nc.publish(
        n.subjects.controlCancel,
        encoder.encode(
          JSON.stringify({
            runId: req.runId,
            ...(req.taskId !== undefined && { taskId: req.taskId }),
          }),
        ),
      );
      return {
        runId: req.runId,
        ...(req.taskId !== undefined && { taskId: req.taskId }),
        cancelled,
      };
    },
  };

  function taskCancelled(runId: string, taskId: string, reason: string): Command {
    return {
      subject: n.subjects.task(runId, taskId),
      type: 'TaskCancelled',
      data: { reason },
    };
  }
}
