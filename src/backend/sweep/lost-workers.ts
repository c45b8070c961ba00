import type { LiveWorker } from '../../../actors/reconciler/fleet.js';
import { vanishedWorkers } from '../../../actors/reconciler/vanished-workers.js';
import type { BackendContext } from '../context.js';
import { DecisionWriter } from '../projection/index.js';

/**
 * Appends `WorkerLost{reason:'expired'}` for every joined worker (Active or Draining) whose
 * registry key is gone with no event saying so: the same judgement as the reconciler's full
 * tick (actors/reconciler/vanished-workers.ts), as a backstop for a fleet whose leader was
 * down or never passed its age floor. The age floor is taken as passed: the sweep reads the
 * whole bucket, and a key missing from it has not been renewed for a pulse TTL. Each event is
 * appended only onto the state it was judged on, so the reconciler and the sweep never both
 * lose one worker.
 *
 * @returns the workers declared lost.
 */
export async function loseVanishedWorkers(
  ctx: BackendContext,
  entries: readonly LiveWorker[],
): Promise<string[]> {
  const events = vanishedWorkers(ctx.loop.projection, entries, ctx.now(), {
    pulseTtlMs: ctx.config.pulseTtlMs,
    ageFloorPassed: true,
  });
  const writer = new DecisionWriter(ctx.store, ctx.loop, ctx.names);
  const lost: string[] = [];
  for (const e of events) {
    if ((await writer.write(e)) !== 'written') continue;
    lost.push(e.ref.key);
    await fenceOff(ctx, e.ref.key);
  }
  return lost;
}

/**
 * Deletes a worker's registry key once it is declared Lost (best effort). Its key was gone
 * when judged; should it be back (a listing that missed it, a stalled worker whose pulse
 * landed just after), the worker's next compare-and-set pulse fails on the delete and it
 * exits (DESIGN.md section 4), instead of pulsing on, Lost and never told.
 */
export async function fenceOff(ctx: BackendContext, workerId: string): Promise<void> {
  await ctx.registry.remove(workerId).catch(() => {});
}
