import type { LiveWorker } from '../../../actors/reconciler/fleet.js';
import { vanishedWorkers } from '../../../actors/reconciler/vanished-workers.js';
import type { BackendContext } from '../context.js';
import { DecisionWriter } from '../decision-writer.js';

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
    if ((await writer.write(e)) === 'written') lost.push(e.ref.key);
  }
  return lost;
}
