import type { Projection } from '../../../../actors/projection.js';
import { delayedTasks } from '../../../../actors/reconciler/delays.js';
import { readFleet } from '../../../../actors/reconciler/fleet.js';
import { parseTagRates, tokensLeft } from '../../../../actors/reconciler/tag-rates.js';
import type { TagRates } from '../../../../actors/reconciler/tag-rates.js';
import type { RegistryEntry } from '../../../protocol.js';

export interface WorkerRow {
  workerId: string;
  host: string;
  instanceId: string | null;
  /** `Active` or `Draining` from the events; `Unknown` for a registry key with no join. */
  state: 'Active' | 'Draining' | 'Unknown';
  tags: string[];
  slots: number;
  /** Tasks Running on it, from the events. */
  inUse: number;
  /** Its registry entry exists (it pulses); false between the join and the first pulse. */
  pulsing: boolean;
  /** Server time of its last pulse; null before the first. */
  pulseAt: string | null;
  pulseAgeMs: number | null;
  /** Placement may choose it now (active, recent pulse, not draining). */
  eligible: boolean;
  drainReason: string | null;
  /** A spot notice's deadline, when it drains for one. */
  spotDeadline: string | null;
}

export interface CapacityBar {
  /** floor(multiplier x slots of eligible workers). */
  total: number;
  published: number;
  running: number;
  /** What placement could still use: total - published - running, at least 0. */
  free: number;
}

export interface OverviewView {
  now: string;
  workers: WorkerRow[];
  capacity: { global: CapacityBar; tags: (CapacityBar & { tag: string })[] };
  /** Jobs in `SONAR_FINALIZE` (waiting, leased or delayed); null when it could not be read. */
  finalizeQueue: number | null;
  poisoned: number;
  /** `delayed`: of the Pending tasks, those a notBefore still holds back. */
  tasks: {
    pending: number;
    delayed: number;
    published: number;
    running: number;
    finalizing: number;
  };
  activeRuns: number;
  leader: { nodeId: string; electedAt: string } | null;
  /** Who holds the `reconciler` lock right now (null: nobody, or unreadable). */
  lockHolder: string | null;
  starved: { step: string; runId: string; stepId: string; tags: string[] }[];
  /**
   * The rate-limited tags an eligible worker serves, by the rates the leader announced, with
   * the publishes each bucket allows now; absent when the leader announced none.
   */
  rateLimited?: { tag: string; rate: string; left: number }[];
}

export interface OverviewInputs {
  projection: Projection;
  registry: readonly RegistryEntry[];
  now: number;
  pulseTtlMs: number;
  capacityMultiplier: number;
  finalizeQueue: number | null;
  lockHolder: string | null;
}

/**
 * The Overview page's data. Workers, tasks and steps come from the projection (the events);
 * pulses and eligibility from the registry, read by the same rules the reconciler uses
 * (`readFleet`), so the bars show what placement sees.
 */
export function buildOverview(inp: OverviewInputs): OverviewView {
  const p = inp.projection;
  const fleet = readFleet(p, inp.registry, inp.now, inp);
  const byId = new Map(inp.registry.map((e) => [e.workerId, e]));
  const inUse = new Map<string, number>();
  for (const key of p.tasksByState.Running) {
    const w = p.tasks.get(key)?.snapshot.context.workerId;
    if (w) inUse.set(w, (inUse.get(w) ?? 0) + 1);
  }
  const workers: WorkerRow[] = [];
  for (const id of p.workersInService) {
    const { snapshot } = p.workers.get(id)!;
    const state = snapshot.value;
    if (state !== 'Active' && state !== 'Draining') continue;
    const c = snapshot.context;
    const base: WorkerBase = {
      workerId: id,
      host: c.host,
      instanceId: c.instanceId,
      state,
      tags: c.tags,
      slots: c.slots,
      drainReason: c.drainReason,
      spotDeadline: c.drainReason === 'spot-interruption' ? c.deadline : null,
    };
    workers.push(workerRow(base, byId.get(id), inp, inUse));
  }
  for (const e of inp.registry) {
    if (p.workers.has(e.workerId)) continue; // listed above, or Lost/Left: not live
    const base: WorkerBase = {
      workerId: e.workerId,
      host: e.host,
      instanceId: e.instanceId ?? null,
      state: 'Unknown',
      tags: e.tags,
      slots: e.slots,
      drainReason: null,
      spotDeadline: null,
    };
    workers.push(workerRow(base, e, inp, inUse));
  }
  workers.sort((a, b) => (a.workerId < b.workerId ? -1 : 1));

  const m = inp.capacityMultiplier;
  const flight = new Map<string, { published: number; running: number }>();
  const totals = { published: 0, running: 0 };
  for (const state of ['Published', 'Running'] as const) {
    const field = state === 'Published' ? 'published' : 'running';
    for (const key of p.tasksByState[state]) {
      totals[field]++;
      const tag = p.tasks.get(key)?.snapshot.context.tag;
      if (!tag) continue;
      const f = flight.get(tag) ?? { published: 0, running: 0 };
      f[field]++;
      flight.set(tag, f);
    }
  }
  const tagNames = [...new Set([...fleet.tagSlots.keys(), ...flight.keys()])].sort();
  const tags = tagNames.map((tag) => ({
    tag,
    ...bar(
      Math.floor(m * (fleet.tagSlots.get(tag) ?? 0)),
      flight.get(tag) ?? { published: 0, running: 0 },
    ),
  }));

  const starved: OverviewView['starved'] = [];
  for (const key of p.activeSteps) {
    const step = p.steps.get(key)?.snapshot;
    if (!step?.context.starved) continue;
    const { runId, stepId, tags: stepTags } = step.context;
    starved.push({ step: key, runId, stepId, tags: stepTags });
  }

  const rateLimited = rateLimitsOf(p, fleet.tagSlots, inp.now);
  return {
    now: new Date(inp.now).toISOString(),
    workers,
    capacity: { global: bar(Math.floor(m * fleet.totalSlots), totals), tags },
    finalizeQueue: inp.finalizeQueue,
    poisoned: p.tasksByState.Poisoned.size,
    tasks: {
      pending: p.tasksByState.Pending.size,
      delayed: delayedInAll(p, inp.now),
      published: p.tasksByState.Published.size,
      running: p.tasksByState.Running.size,
      finalizing: p.tasksByState.Finalizing.size,
    },
    activeRuns: p.activeRuns.size,
    leader: p.leader ? { nodeId: p.leader.nodeId, electedAt: p.leader.time } : null,
    lockHolder: inp.lockHolder,
    starved,
    ...(rateLimited.length > 0 && { rateLimited }),
  };
}

/** Pending tasks a notBefore still holds back, in every step with Pending tasks. */
function delayedInAll(p: Projection, now: number): number {
  let n = 0;
  for (const key of p.activeSteps) {
    if ((p.stepIndex.get(key)?.counts.Pending ?? 0) > 0) n += delayedTasks(p, key, now);
  }
  return n;
}

function bar(total: number, f: { published: number; running: number }): CapacityBar {
  return { total, ...f, free: Math.max(0, total - f.published - f.running) };
}

type WorkerBase = Omit<WorkerRow, 'inUse' | 'pulsing' | 'pulseAt' | 'pulseAgeMs' | 'eligible'>;

function workerRow(
  base: WorkerBase,
  entry: RegistryEntry | undefined,
  inp: OverviewInputs,
  inUse: ReadonlyMap<string, number>,
): WorkerRow {
  const pulseAgeMs = entry ? Math.max(0, inp.now - Date.parse(entry.pulseAt)) : null;
  return {
    ...base,
    inUse: inUse.get(base.workerId) ?? 0,
    pulsing: entry !== undefined,
    pulseAt: entry?.pulseAt ?? null,
    pulseAgeMs,
    // The same rule as readFleet: active, pulse within the TTL, and not Draining.
    eligible:
      entry !== undefined &&
      entry.active &&
      base.state !== 'Draining' &&
      pulseAgeMs !== null &&
      pulseAgeMs <= inp.pulseTtlMs,
  };
}

/** The leader's announced rates on served tags, each with its bucket's tokens at `now`. */
function rateLimitsOf(
  p: Projection,
  served: ReadonlyMap<string, number>,
  now: number,
): NonNullable<OverviewView['rateLimited']> {
  const announced = p.leader?.tagRates;
  if (announced === undefined) return [];
  let rates: TagRates;
  try {
    rates = parseTagRates(announced);
  } catch (_err: unknown) {
    return []; // a value this build cannot read: shown without limits
  }
  return Object.keys(rates)
    .filter((tag) => served.has(tag))
    .sort()
    .map((tag) => ({
      tag,
      rate: rates[tag]!.text,
      left: tokensLeft(p.publishTimes.get(tag), rates[tag]!, now),
    }));
}
