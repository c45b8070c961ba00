import type { Projection } from '../../../actors/projection.js';
import type { LiveWorker } from '../../../actors/reconciler/fleet.js';

/**
 * When each tag was last advertised by a worker, in ms: `now` for a tag in the live registry
 * or held by a worker still joined (Active or Draining: its key may only be late), the end
 * of the last worker that held it otherwise (WorkerLeft or WorkerLost time). The projection
 * keeps every worker that ever joined, so this survives restarts without a store of its own.
 */
export function lastAdvertised(
  p: Projection,
  entries: readonly LiveWorker[],
  now: number,
): Map<string, number> {
  const out = new Map<string, number>();
  const saw = (tag: string, at: number): void => {
    if (!(at <= (out.get(tag) ?? -Infinity))) out.set(tag, at);
  };
  for (const e of entries) for (const tag of e.tags) saw(tag, now);
  for (const { snapshot } of p.workers.values()) {
    const { tags, endedAt } = snapshot.context;
    const at = snapshot.status === 'done' && endedAt !== null ? Date.parse(endedAt) : now;
    for (const tag of tags) saw(tag, at);
  }
  return out;
}
