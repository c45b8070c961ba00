import type { Projection } from '../projection.js';

/** Whether a step's own `notBefore` still holds all its tasks back at `now`. */
export function isStepHeld(p: Projection, stepKey: string, now: number): boolean {
  const notBefore = p.steps.get(stepKey)?.snapshot.context.notBefore ?? null;
  return notBefore !== null && Date.parse(notBefore) > now;
}

/**
 * A step's delayed tasks at `now`: Pending and not to be placed before a `notBefore` (their
 * own, or their step's) still to come. A task waiting out a retry backoff is not counted: it
 * has run, and `retryAt` says when it runs again. Counts by position in the step's `timed`
 * index, never walking its tasks.
 */
export function delayedTasks(p: Projection, stepKey: string, now: number): number {
  const index = p.stepIndex.get(stepKey);
  if (!index) return 0;
  if (isStepHeld(p, stepKey, now)) return index.counts.Pending;
  return index.timed.notYetDue(now);
}
