import { ErrorCode, SonarError } from '../../../../actors/errors.js';
import type { WorkerSnapshot } from '../../../../actors/projection.js';
import type { BackendContext } from '../../context.js';
import { syncRecent } from './sync.js';

/** The worker's current snapshot, after catching up on its events; undefined when unknown. */
export async function workerOf(
  ctx: BackendContext,
  workerId: string,
): Promise<WorkerSnapshot | undefined> {
  await syncRecent(ctx);
  return ctx.loop.projection.workers.get(workerId)?.snapshot;
}

/** `conflict`: the worker is Lost or Left; it must exit so its supervisor starts a new one. */
export function goneError(workerId: string, state: string): SonarError {
  return new SonarError(
    ErrorCode.Conflict,
    `worker ${workerId} is ${state}: a worker id is used once; exit and start a new worker`,
    { workerId, state },
  );
}

export function notJoinedError(workerId: string): SonarError {
  return new SonarError(ErrorCode.NotFound, `worker ${workerId} has not joined: call join first`, {
    workerId,
  });
}

/**
 * A worker that may act (Active or Draining). Unknown -> `not_found`; Lost or Left ->
 * `conflict` (DESIGN.md section 4: a partitioned worker that comes back is refused).
 */
export async function requireLiveWorker(
  ctx: BackendContext,
  workerId: string,
): Promise<WorkerSnapshot> {
  const worker = await workerOf(ctx, workerId);
  if (!worker) throw notJoinedError(workerId);
  if (worker.value === 'Lost' || worker.value === 'Left') throw goneError(workerId, worker.value);
  return worker;
}
