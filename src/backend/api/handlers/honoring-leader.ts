import { ErrorCode, SonarError } from '../../../../actors/errors.js';
import type { Projection } from '../../../../actors/projection.js';
import type { PlannerHonors } from '../../../../actors/reconciler/honors.js';

/** Where a run file first uses a field the planner must honor. */
export interface PlannerFieldUse {
  field: PlannerHonors;
  path: string;
}

/** The first step or task of `items` with a `priority`, `notBefore` or `delay`, if any. */
export function plannerFieldUse(
  items: readonly { priority?: unknown; notBefore?: unknown; delay?: unknown }[],
  path = 'steps',
): PlannerFieldUse | null {
  for (const [i, item] of items.entries()) {
    if (item.priority !== undefined) return { field: 'priority', path: `${path}.${i}.priority` };
    for (const key of ['notBefore', 'delay'] as const) {
      if (item[key] !== undefined) return { field: 'delay', path: `${path}.${i}.${key}` };
    }
  }
  return null;
}

/**
 * Refuses (`unavailable`, nothing written) a submit using a field the current leader's planner
 * did not announce in its `ReconcilerElected`: an older backend leading a fleet being upgraded
 * would fold the run without it, placing delayed tasks at once and ignoring priorities, and
 * say nothing. Clients retry `unavailable`, so a submit made while the roll finishes goes
 * through once a newer backend leads. No leader elected yet: nothing to judge by, accepted.
 */
export function requireHonoringLeader(
  p: Projection,
  runId: string,
  use: PlannerFieldUse | null,
): void {
  const leader = p.leader;
  if (use === null || leader === null || leader.honors?.includes(use.field)) return;
  throw new SonarError(
    ErrorCode.Unavailable,
    `run ${runId}: '${use.path}' needs a reconciler that honors ${use.field}, and the leader (${leader.nodeId}) is an older backend that would ignore it: upgrade every backend, then submit again`,
    { runId, field: use.field, path: use.path, leader: leader.nodeId },
  );
}
