import type { Projection, StepIndex } from '../projection.js';
import type { PlanConfig } from './config.js';
import type { CapacityView, Decisions } from './decisions.js';
import type { Fleet } from './fleet.js';
import { DEFAULT_PLAN_CONFIG } from './config.js';
import { placementLevels } from './priority-order.js';
import type { Level } from './priority-order.js';

/** A Ready step of a Running run, as placement sees it. */
export interface ReadyStep {
  key: string;
  index: StepIndex;
  maxConcurrent: number | null;
  /** Its tasks requeued in this tick: Pending again, and placeable in the same tick. */
  requeuedNow: string[];
  /** Its tasks requeued or dead in this tick: out of flight. */
  recoveredNow: number;
  /** Its Pending tasks a notBefore still holds back (delays.ts); absent: none. */
  delayed?: number;
}

/** Remaining capacity (DESIGN.md section 5); figures may be negative until reported. */
export interface Capacity {
  global: number;
  /** Per tag advertised by an eligible worker. */
  tags: Map<string, number>;
  /** Per Ready step with `maxConcurrent`. */
  steps: Map<string, number>;
  /**
   * Per rate-limited tag advertised by an eligible worker: the publishes its bucket still
   * allows (tag-rates.ts). A tag not listed has no rate limit.
   */
  tokens?: Map<string, number>;
}

/**
 * Capacity once the tick's requeues and deaths are counted out of flight:
 * tag = floor(m x slots of eligible workers with the tag) - tasks Published or Running there;
 * global = floor(m x slots, each worker once) - all tasks Published or Running;
 * step = maxConcurrent - the step's tasks Published or Running.
 * Walks only the tasks in flight.
 */
export function capacityAfter(
  p: Projection,
  fleet: Fleet,
  recovered: ReadonlySet<string>,
  steps: readonly ReadyStep[],
  config: Pick<PlanConfig, 'capacityMultiplier'>,
): Capacity {
  const m = config.capacityMultiplier;
  const tags = new Map<string, number>();
  for (const [tag, slots] of fleet.tagSlots) tags.set(tag, Math.floor(m * slots));
  let global = Math.floor(m * fleet.totalSlots);
  for (const state of ['Published', 'Running'] as const) {
    for (const key of p.tasksByState[state]) {
      if (recovered.has(key)) continue;
      global--;
      const tag = p.tasks.get(key)!.snapshot.context.tag;
      const left = tag === null ? undefined : tags.get(tag);
      if (left !== undefined) tags.set(tag!, left - 1);
    }
  }
  const stepCaps = new Map<string, number>();
  for (const s of steps) {
    if (s.maxConcurrent === null) continue;
    const inFlight = s.index.counts.Published + s.index.counts.Running - s.recoveredNow;
    stepCaps.set(s.key, s.maxConcurrent - inFlight);
  }
  return { global, tags, steps: stepCaps };
}

/** The reported form: tags in name order, steps in creation order, negatives as 0. */
export function capacityView(cap: Capacity): CapacityView {
  const tags: Record<string, number> = {};
  for (const tag of [...cap.tags.keys()].sort()) tags[tag] = Math.max(0, cap.tags.get(tag)!);
  const steps: Record<string, number> = {};
  for (const [key, n] of cap.steps) steps[key] = Math.max(0, n);
  return { global: Math.max(0, cap.global), tags, steps };
}

/**
 * What a tag can still take this tick: its capacity, or fewer when its rate limit allows fewer
 * publishes; undefined when no eligible worker advertises it.
 */
function leftOf(tag: string, cap: Capacity): number | undefined {
  const left = cap.tags.get(tag);
  const tokens = cap.tokens?.get(tag);
  return tokens === undefined || left === undefined ? left : Math.min(left, tokens);
}

/**
 * The serviceable target tag that can take the most (capacity, within its rate limit); ties go
 * to the first tag by name. A tag whose bucket is empty is passed over like a full one, so a
 * task that may also go elsewhere goes elsewhere.
 */
function bestTag(targets: readonly string[], cap: Capacity): string | null {
  let best: string | null = null;
  let bestLeft = 0;
  for (const tag of targets) {
    const left = leftOf(tag, cap);
    if (left === undefined || left <= 0) continue;
    if (best === null || left > bestLeft || (left === bestLeft && tag < best)) {
      best = tag;
      bestLeft = left;
    }
  }
  return best;
}

/**
 * Whether any tag a step's Pending tasks name can still take a task (else stop reading it): a
 * step whose tags are full or out of tokens is left at once, and other steps go on.
 */
function anyTagLeft(s: ReadyStep, p: Projection, cap: Capacity): boolean {
  for (const tag of s.index.pendingTags.keys()) if ((leftOf(tag, cap) ?? 0) > 0) return true;
  for (const key of s.requeuedNow) {
    for (const tag of p.tasks.get(key)!.snapshot.context.spec.tags) {
      if ((leftOf(tag, cap) ?? 0) > 0) return true;
    }
  }
  return false;
}

/**
 * Water-fills Pending tasks into capacity (DESIGN.md section 5): priority levels in the order
 * of {@link placementLevels}, each as turns of a round-robin over its steps in creation order,
 * each step placing up to `batch` tasks a turn in creation order, each task to its serviceable
 * target tag with the most capacity left, every placement charged to tag, global and step
 * capacity, and to the tag's rate limit when it has one. A level is left once no task of it can
 * be placed; the next takes what capacity is left. A task not yet due (`notBefore`,
 * `retryAt`), or whose target tags have no capacity or no tokens left, is passed over for this
 * tick. Runs until no capacity or no placeable task is left.
 * Consumes `cap`.
 */
export function waterFill(
  p: Projection,
  steps: readonly ReadyStep[],
  cap: Capacity,
  now: number,
  batch: number,
  priorityAgingMs = DEFAULT_PLAN_CONFIG.priorityAgingMs,
): Decisions['publish'] {
  const out: Decisions['publish'] = [];
  for (const level of placementLevels(p, steps, now, priorityAgingMs)) {
    if (cap.global <= 0) break;
    fillLevel(p, level, cap, batch, out);
  }
  return out;
}

/** One level's round-robin, until no capacity or no placeable task of it is left. */
function fillLevel(
  p: Projection,
  level: Level,
  cap: Capacity,
  batch: number,
  out: Decisions['publish'],
): void {
  const queues = level.lanes;
  let open = queues.length;
  const done = new Array<boolean>(queues.length).fill(false);
  while (open > 0 && cap.global > 0) {
    for (let i = 0; i < queues.length && cap.global > 0; i++) {
      if (done[i]) continue;
      const { step: s, order } = queues[i]!;
      let placed = 0;
      while (placed < batch && cap.global > 0) {
        const stepLeft = cap.steps.get(s.key);
        const key = stepLeft !== undefined && stepLeft <= 0 ? undefined : order.next();
        if (key === undefined) {
          done[i] = true;
          open--;
          break;
        }
        const c = p.tasks.get(key)!.snapshot.context;
        const tag = bestTag(c.spec.tags, cap);
        if (tag === null) {
          // Capacity only shrinks within a tick: once no tag of the step has any, stop reading it.
          if (!anyTagLeft(s, p, cap)) {
            done[i] = true;
            open--;
            break;
          }
          continue;
        }
        out.push({ task: key, tag });
        cap.tags.set(tag, cap.tags.get(tag)! - 1);
        const tokens = cap.tokens?.get(tag);
        if (tokens !== undefined) cap.tokens!.set(tag, tokens - 1);
        cap.global--;
        if (stepLeft !== undefined) cap.steps.set(s.key, stepLeft - 1);
        placed++;
      }
    }
  }
}
