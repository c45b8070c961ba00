/**
 * The simulation's checks of priorities and delays, computed from the projection and the
 * tick's decisions, not with actors/reconciler's own code: a bug in the planner cannot hide
 * behind the same bug here. Each is called after the tick's requeues are applied and before
 * its publishes are.
 */
import type { Projection } from '../../actors/projection.js';
import type { Decisions } from '../../actors/reconciler/decisions.js';

const stepOf = (p: Projection, task: string) => {
  const { runId, stepId } = p.tasks.get(task)!.snapshot.context.spec;
  return p.steps.get(`${runId}.${stepId}`)!.snapshot;
};

/** A task not to be placed before `now`: a notBefore (its own, its step's) or a retryAt to come. */
function heldBack(p: Projection, task: string, now: number): string | null {
  const c = p.tasks.get(task)!.snapshot.context;
  if (c.retryAt !== null && Date.parse(c.retryAt) > now) return `its time ${c.retryAt}`;
  const stepAt = stepOf(p, task).context.notBefore;
  if (stepAt !== null && Date.parse(stepAt) > now) return `its step's time ${stepAt}`;
  return null;
}

/** Whether `task` (not yet published) has a notBefore of its own or its step's. */
export const wasDelayed = (p: Projection, task: string): boolean => {
  const c = p.tasks.get(task)!.snapshot.context;
  return (c.attempt === 0 && c.retryAt !== null) || stepOf(p, task).context.notBefore !== null;
};

/** Nothing is published before its time. */
export function checkNotBefore(p: Projection, d: Decisions, now: number): string[] {
  const out: string[] = [];
  for (const { task } of d.publish) {
    const why = heldBack(p, task, now);
    if (why !== null) out.push(`${task} published before ${why}`);
  }
  return out;
}

/**
 * With aging off: no task is published to a tag that a due, unplaced task of a higher
 * priority could have taken (a step at maxConcurrent aside), since capacity only shrinks
 * within a tick and higher priorities are served first.
 */
export function checkPriorityOrder(p: Projection, d: Decisions, now: number): string[] {
  if (d.publish.length === 0) return [];
  const priorityOf = (task: string): number =>
    p.tasks.get(task)!.snapshot.context.spec.priority ?? stepOf(p, task).context.priority;
  const lowest = new Map<string, { priority: number; task: string }>();
  const placed = new Set<string>();
  for (const { task, tag } of d.publish) {
    placed.add(task);
    const priority = priorityOf(task);
    if (priority < (lowest.get(tag)?.priority ?? Infinity)) lowest.set(tag, { priority, task });
  }
  const out: string[] = [];
  for (const task of p.tasksByState.Pending) {
    if (placed.has(task) || heldBack(p, task, now) !== null) continue;
    const step = stepOf(p, task);
    if (step.value !== 'Ready' || step.context.maxConcurrent !== null) continue;
    if (p.runs.get(step.context.runId)?.snapshot.value !== 'Running') continue;
    const priority = priorityOf(task);
    for (const tag of p.tasks.get(task)!.snapshot.context.spec.tags) {
      const low = lowest.get(tag);
      if (low !== undefined && low.priority < priority) {
        out.push(`${low.task} (priority ${low.priority}) took ${tag} before ${task} (${priority})`);
      }
    }
  }
  return out;
}
