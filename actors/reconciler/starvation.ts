import type { Projection } from '../projection.js';
import type { ReadyStep } from './capacity.js';
import { reconcilerEvent } from './decisions.js';
import type { ReconcilerEvent } from './decisions.js';
import type { Fleet } from './fleet.js';

/**
 * Starved (DESIGN.md section 5): Ready, with Pending tasks that are not all delayed (a
 * notBefore still to come), and none of their target tags has an eligible worker. A tag whose
 * workers are all busy is not starved: it only has no capacity; nor is a step that waits for
 * its time. Reads the step's Pending-tags index, never its tasks.
 */
export function isStarved(s: ReadyStep, p: Projection, fleet: Fleet): boolean {
  const pending = s.index.fresh.size + s.index.returned.size + s.requeuedNow.length;
  if (pending - (s.delayed ?? 0) <= 0) return false;
  for (const tag of s.index.pendingTags.keys()) if (fleet.tagSlots.has(tag)) return false;
  for (const key of s.requeuedNow) {
    for (const tag of p.tasks.get(key)!.snapshot.context.spec.tags) {
      if (fleet.tagSlots.has(tag)) return false;
    }
  }
  return true;
}

/**
 * The flag changes a tick's `starved` list calls for: `StepStarved` (with the target tags no
 * worker serves) for a step that just became starved, `StepServed` for a flagged Ready step
 * that no longer is. One event per change, never one per tick.
 */
export function starvationEvents(p: Projection, starved: readonly string[]): ReconcilerEvent[] {
  const out: ReconcilerEvent[] = [];
  const now = new Set(starved);
  for (const key of starved) {
    const step = p.steps.get(key);
    if (!step || step.snapshot.value !== 'Ready' || step.snapshot.context.starved) continue;
    const tags = [...(p.stepIndex.get(key)?.pendingTags.keys() ?? [])].sort();
    out.push(reconcilerEvent({ kind: 'step', key }, 'StepStarved', { tags }, step.seq));
  }
  for (const key of p.activeSteps) {
    const step = p.steps.get(key)!;
    if (step.snapshot.value !== 'Ready' || !step.snapshot.context.starved || now.has(key)) continue;
    out.push(reconcilerEvent({ kind: 'step', key }, 'StepServed', {}, step.seq));
  }
  return out;
}
