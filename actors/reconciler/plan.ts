import type { Projection } from '../projection.js';
import { capacityAfter, capacityView, waterFill } from './capacity.js';
import type { Capacity, ReadyStep } from './capacity.js';
import type { PlanConfig } from './config.js';
import type { Decisions } from './decisions.js';
import { readFleet } from './fleet.js';
import type { LiveWorker } from './fleet.js';
import { judgeRecoveries } from './recovery.js';
import type { Recovery } from './recovery.js';
import { delayedTasks } from './delays.js';
import { isStarved } from './starvation.js';
import { tokensLeft } from './tag-rates.js';

/**
 * Fills `cap.tokens` from the projection's publish times for every rate-limited tag an
 * eligible worker advertises (a tag nobody serves takes no task, limited or not), and returns
 * the reported form; undefined when there is none.
 */
function applyTagRates(
  p: Projection,
  cap: Capacity,
  now: number,
  config: PlanConfig,
): Decisions['rateLimited'] {
  const rates = config.tagRates;
  if (!rates) return undefined;
  const tags = Object.keys(rates)
    .filter((tag) => cap.tags.has(tag))
    .sort();
  if (tags.length === 0) return undefined;
  cap.tokens = new Map();
  const out: NonNullable<Decisions['rateLimited']> = {};
  for (const tag of tags) {
    const rate = rates[tag]!;
    const left = tokensLeft(p.publishTimes.get(tag), rate, now);
    cap.tokens.set(tag, left);
    out[tag] = { rate: rate.text, left };
  }
  return out;
}

/**
 * The Ready steps of Running runs, in `StepCreated` order, each with its tasks this tick takes
 * out of flight (requeued ones become placeable again at once).
 */
function readySteps(p: Projection, recoveries: readonly Recovery[], now: number): ReadyStep[] {
  const byStep = new Map<string, { requeued: string[]; count: number }>();
  for (const r of recoveries) {
    const { runId, stepId } = p.tasks.get(r.task)!.snapshot.context.spec;
    const stepKey = `${runId}.${stepId}`;
    let entry = byStep.get(stepKey);
    if (!entry) byStep.set(stepKey, (entry = { requeued: [], count: 0 }));
    entry.count++;
    if (!r.dead) entry.requeued.push(r.task);
  }
  const out: ReadyStep[] = [];
  for (const key of p.activeSteps) {
    const step = p.steps.get(key)!.snapshot;
    if (step.value !== 'Ready') continue;
    if (p.runs.get(step.context.runId)?.snapshot.value !== 'Running') continue;
    const recovered = byStep.get(key);
    out.push({
      key,
      // Every step event creates its index, so a created step always has one.
      index: p.stepIndex.get(key)!,
      maxConcurrent: step.context.maxConcurrent,
      requeuedNow: recovered?.requeued ?? [],
      recoveredNow: recovered?.count ?? 0,
      delayed: delayedTasks(p, key, now),
    });
  }
  return out;
}

/**
 * One reconcile tick's decisions (DESIGN.md sections 4, 5 and 8), a pure function of its
 * inputs: the same projection, registry, clock and config give the same decisions, in the
 * same order. First requeues and deaths, then capacity (counting them out of flight), then
 * placement by water-filling in priority order (within each tag's rate limit), the starved
 * steps, and the delayed tasks.
 *
 * Cost: the tasks in flight, the active steps, and the Pending tasks it places or passes over;
 * never a walk of every task.
 *
 * @param live - the registry: every key that exists, `pulseAt` as server time.
 * @param now - the clock (ms since the epoch), on the server's time line.
 * @param undelivered - attempts whose dispatch message was looked for and is not there
 *   (see judgeRecoveries).
 */
export function plan(
  p: Projection,
  live: readonly LiveWorker[],
  now: number,
  config: PlanConfig,
  undelivered?: ReadonlySet<string>,
): Decisions {
  const fleet = readFleet(p, live, now, config);
  const recoveries = judgeRecoveries(p, fleet, now, config, undelivered);
  const steps = readySteps(p, recoveries, now);
  const cap = capacityAfter(p, fleet, new Set(recoveries.map((r) => r.task)), steps, config);
  const capacity = capacityView(cap);
  const rateLimited = applyTagRates(p, cap, now, config);
  const publish = waterFill(p, steps, cap, now, config.batch, config.priorityAgingMs);
  const delayed: Record<string, number> = {};
  for (const s of steps) if (s.delayed! > 0) delayed[s.key] = s.delayed!;
  return {
    requeue: recoveries.filter((r) => !r.dead).map(({ task, reason }) => ({ task, reason })),
    dead: recoveries.filter((r) => r.dead).map(({ task }) => ({ task })),
    publish,
    starved: steps.filter((s) => isStarved(s, p, fleet)).map((s) => s.key),
    capacity,
    // Only when some task is delayed: a plan of a log without delays prints what it always did.
    ...(Object.keys(delayed).length > 0 && { delayed }),
    // Only with a rate limit on a served tag, for the same reason.
    ...(rateLimited && { rateLimited }),
  };
}
