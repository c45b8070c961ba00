import type { Projection } from '../projection.js';
import type { PlanConfig } from './config.js';

/**
 * A registry entry as the reconciler reads it (DESIGN.md section 4). `pulseAt` is the server
 * time of the worker's last pulse (the backend replaces the worker's own clock with the KV
 * entry's timestamp). The backend's RegistryEntry fits this shape.
 */
export interface LiveWorker {
  workerId: string;
  tags: readonly string[];
  slots: number;
  active: boolean;
  /** ISO-8601 server time of the last pulse. */
  pulseAt: string;
  /** Task keys `<runId>.<taskId>` the worker holds (absent in hand-written plan inputs). */
  running?: readonly string[];
}

/** What the registry says about the fleet at `now`. */
export interface Fleet {
  /** Workers whose key exists and whose worker is not Lost or Left: recovery waits for them. */
  live: Set<string>;
  /** The registry entry of each live worker. */
  entries: Map<string, LiveWorker>;
  /** Slots of eligible workers per advertised tag (a tag is listed only if one is eligible). */
  tagSlots: Map<string, number>;
  /** Slots of eligible workers, each worker counted once however many tags it advertises. */
  totalSlots: number;
}

/**
 * Sorts the registry into live and eligible workers. Live: the key exists, and the worker is
 * neither Lost nor Left (a partitioned worker that comes back is refused, so it holds nothing).
 * Eligible for placement: live, `active`, not Draining, and its pulse is recent
 * (`now - pulseAt <= pulseTtl`). A key with no `WorkerJoined` behind it counts as the
 * registry says (the log may simply not hold the join, as in a `sonar plan` scenario).
 */
export function readFleet(
  p: Projection,
  entries: readonly LiveWorker[],
  now: number,
  config: Pick<PlanConfig, 'pulseTtlMs'>,
): Fleet {
  const live = new Set<string>();
  const byId = new Map<string, LiveWorker>();
  const tagSlots = new Map<string, number>();
  let totalSlots = 0;
  for (const e of entries) {
    const state = p.workers.get(e.workerId)?.snapshot.value;
    if (state === 'Lost' || state === 'Left') continue;
    live.add(e.workerId);
    byId.set(e.workerId, e);
    if (!e.active || state === 'Draining') continue;
    const age = now - Date.parse(e.pulseAt);
    if (!(age <= config.pulseTtlMs)) continue; // NaN (an unreadable time) is not recent
    totalSlots += e.slots;
    e.tags.forEach((tag, i) => {
      // A tag listed twice by one worker still counts its slots once.
      if (e.tags.indexOf(tag) === i) tagSlots.set(tag, (tagSlots.get(tag) ?? 0) + e.slots);
    });
  }
  return { live, entries: byId, tagSlots, totalSlots };
}
