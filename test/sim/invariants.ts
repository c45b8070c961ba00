/**
 * The simulation's per-tick checks, computed independently of actors/reconciler (from the
 * registry entries the tick used and the projection), so a bug in the planner cannot hide
 * behind the same bug in its check.
 */
import type { Projection } from '../../actors/projection.js';
import type { PlanConfig } from '../../actors/reconciler/config.js';
import type { Decisions } from '../../actors/reconciler/decisions.js';
import type { LiveWorker } from '../../actors/reconciler/fleet.js';

/** Slots of eligible workers per tag and in all (DESIGN.md sections 4 and 5). */
export function eligibleSlots(
  p: Projection,
  entries: readonly LiveWorker[],
  now: number,
  config: PlanConfig,
): { byTag: Map<string, number>; total: number } {
  const byTag = new Map<string, number>();
  let total = 0;
  for (const e of entries) {
    const state = p.workers.get(e.workerId)?.snapshot.value;
    if (state !== undefined && state !== 'Active') continue;
    if (!e.active || now - Date.parse(e.pulseAt) > config.pulseTtlMs) continue;
    total += e.slots;
    for (const tag of e.tags) byTag.set(tag, (byTag.get(tag) ?? 0) + e.slots);
  }
  return { byTag, total };
}

/** Tasks Published or Running, per tag, per step and in all. */
export function inFlight(p: Projection) {
  const byTag = new Map<string, number>();
  const byStep = new Map<string, number>();
  let total = 0;
  for (const state of ['Published', 'Running'] as const) {
    for (const key of p.tasksByState[state]) {
      const c = p.tasks.get(key)!.snapshot.context;
      total++;
      byTag.set(c.tag!, (byTag.get(c.tag!) ?? 0) + 1);
      const step = `${c.spec.runId}.${c.spec.stepId}`;
      byStep.set(step, (byStep.get(step) ?? 0) + 1);
    }
  }
  return { byTag, byStep, total };
}

/**
 * After the tick's decisions are applied: no capacity a placement was charged to is exceeded
 * (tag, global; a step's maxConcurrent at any time), and nothing went to a tag without an
 * eligible worker.
 */
export function checkPlacement(
  p: Projection,
  before: { byTag: Map<string, number>; total: number },
  decisions: Decisions,
  config: PlanConfig,
): string[] {
  const problems: string[] = [];
  const m = config.capacityMultiplier;
  const after = inFlight(p);
  const placedTags = new Set(decisions.publish.map((x) => x.tag));
  for (const tag of placedTags) {
    const slots = before.byTag.get(tag);
    if (slots === undefined) {
      problems.push(`published to ${tag}, which has no eligible worker`);
      continue;
    }
    const used = after.byTag.get(tag) ?? 0;
    if (used > Math.floor(m * slots))
      problems.push(`tag ${tag}: ${used} in flight > ${slots} slots`);
  }
  if (decisions.publish.length > 0 && after.total > Math.floor(m * before.total)) {
    problems.push(`global: ${after.total} in flight > ${before.total} slots`);
  }
  for (const [key, n] of after.byStep) {
    const max = p.steps.get(key)?.snapshot.context.maxConcurrent ?? null;
    if (max !== null && n > max)
      problems.push(`step ${key}: ${n} in flight > maxConcurrent ${max}`);
  }
  return problems;
}
