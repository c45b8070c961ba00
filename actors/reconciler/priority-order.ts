import type { Projection } from '../projection.js';
import type { ReadyStep } from './capacity.js';
import { isStepHeld } from './delays.js';
import { PendingOrder } from './pending-order.js';

/** One step's due Pending tasks of one priority, in creation order. */
export interface Lane {
  step: ReadyStep;
  order: PendingOrder;
}

/** The lanes of one priority, in step creation order: they take turns. */
export interface Level {
  priority: number;
  lanes: Lane[];
}

/**
 * The order placement serves a tick's due Pending tasks in (docs/concepts.md, "Placement"):
 * priority levels, highest first, each a round-robin over the steps holding due tasks of that
 * priority, in step creation order. A task's priority is its own, else its step's.
 *
 * The starvation guard is aging: a level ranks as its priority plus one for every
 * `agingMs` that the longest-waiting of its steps' next tasks has waited since it could first
 * be placed (it became Pending, and its notBefore and retry backoff passed). A whole level
 * moves, never one step of it, so that steps of one priority always take turns; and it moves
 * only while its old tasks wait, so sustained higher-priority work delays lower priorities by
 * at most about `agingMs` per point of difference, and never forever. Ties go to the higher
 * priority. `agingMs` 0 turns aging off (strict priorities).
 *
 * Tasks not yet due (a notBefore or retryAt still to come, or their step's notBefore) are in
 * no lane. Cost: one pass over a step's tasks back from an attempt (few), and a lookup per
 * priority it holds tasks of; the rest is read only as far as placement goes, a due task with a
 * notBefore at a walk down its priority's tree (actors/timed-tasks.ts).
 */
export function placementLevels(
  p: Projection,
  steps: readonly ReadyStep[],
  now: number,
  agingMs: number,
): Level[] {
  const byPriority = new Map<number, Lane[]>();
  for (const s of steps) {
    for (const [priority, order] of lanesOf(p, s, now)) {
      if (order.peek() === undefined) continue;
      const lanes = byPriority.get(priority);
      if (lanes) lanes.push({ step: s, order });
      else byPriority.set(priority, [{ step: s, order }]);
    }
  }
  const levels = [...byPriority].map(([priority, lanes]) => ({ priority, lanes }));
  if (levels.length <= 1) return levels;
  const rank = new Map(levels.map((l) => [l, l.priority + aged(p, l, now, agingMs)]));
  return levels.sort((a, b) => rank.get(b)! - rank.get(a)! || b.priority - a.priority);
}

/** The points a level has aged: its longest wait among its lanes' next tasks, per agingMs. */
function aged(p: Projection, level: Level, now: number, agingMs: number): number {
  if (agingMs <= 0) return 0;
  let longest = 0;
  for (const { step, order } of level.lanes) {
    const c = p.tasks.get(order.peek()!)!.snapshot.context;
    const stepAt = p.steps.get(step.key)!.snapshot.context.notBefore;
    // A context from before queuedAt existed counts as just queued: no credit it cannot show.
    const since = Math.max(
      timeOf(c.queuedAt ?? null, now),
      timeOf(c.retryAt, 0),
      timeOf(stepAt, 0),
    );
    longest = Math.max(longest, now - since);
  }
  return Math.floor(longest / agingMs);
}

const timeOf = (iso: string | null, otherwise: number): number =>
  iso === null ? otherwise : Date.parse(iso);

/**
 * A step's readers by priority. Each merges, in creation order, what the step's index keeps
 * apart: its never-published tasks of that priority (with their own, or none when it is the
 * step's), the due ones of those with a notBefore, and its tasks back from an attempt. Tasks
 * whose notBefore is still to come are never read.
 */
function lanesOf(p: Projection, s: ReadyStep, now: number): [number, PendingOrder][] {
  if (isStepHeld(p, s.key, now)) return [];
  const own = p.steps.get(s.key)!.snapshot.context.priority;
  const { lanes, timed } = s.index;
  const backs = new Map<number, string[]>();
  for (const key of s.index.returned.size + s.requeuedNow.length === 0
    ? []
    : [...s.index.returned, ...s.requeuedNow]) {
    const c = p.tasks.get(key)!.snapshot.context;
    if (c.retryAt !== null && Date.parse(c.retryAt) > now) continue;
    const priority = c.spec.priority ?? own;
    const list = backs.get(priority);
    if (list) list.push(key);
    else backs.set(priority, [key]);
  }
  const fresh = new Map<number, Iterable<string>[]>();
  const addFresh = (priority: number | undefined, source: Iterable<string>): void => {
    const list = fresh.get(priority ?? own);
    if (list) list.push(source);
    else fresh.set(priority ?? own, [source]);
  };
  for (const [priority, lane] of lanes) addFresh(priority, lane);
  for (const priority of timed.priorities()) addFresh(priority, timed.due(priority, now));
  const out: [number, PendingOrder][] = [];
  for (const priority of new Set([own, ...fresh.keys(), ...backs.keys()])) {
    const order = new PendingOrder(s.index, fresh.get(priority) ?? [], backs.get(priority));
    out.push([priority, order]);
  }
  return out;
}
