import type { Projection } from '../projection.js';
import type { PlanConfig } from './config.js';
import { reconcilerEvent } from './decisions.js';
import type { ReconcilerEvent } from './decisions.js';
import type { LiveWorker } from './fleet.js';

/**
 * `WorkerLost{reason:'expired'}` for every Active or Draining worker whose registry key is
 * gone (DESIGN.md section 3). Not before the age floor has passed, and not for a worker that
 * joined less than a pulse TTL ago (its first pulse may still be on its way). `lastPulseAt`
 * is null here: the registry no longer holds it; the backend fills in the last one it saw.
 */
export function vanishedWorkers(
  p: Projection,
  entries: readonly LiveWorker[],
  now: number,
  config: Pick<PlanConfig, 'pulseTtlMs' | 'ageFloorPassed'>,
): ReconcilerEvent[] {
  if (!config.ageFloorPassed) return [];
  const keys = new Set(entries.map((e) => e.workerId));
  const out: ReconcilerEvent[] = [];
  // Only the workers in service: a tick never walks those that joined and left long ago.
  for (const workerId of p.workersInService) {
    if (keys.has(workerId)) continue;
    const { snapshot, seq } = p.workers.get(workerId)!;
    if (!(now - Date.parse(snapshot.context.joinedAt) > config.pulseTtlMs)) continue;
    out.push(
      reconcilerEvent(
        { kind: 'worker', key: workerId },
        'WorkerLost',
        { lastPulseAt: null, reason: 'expired' },
        seq,
      ),
    );
  }
  return out;
}
