import type { Projection } from '../../actors/projection.js';
import type { PlanConfig } from '../../actors/reconciler/config.js';
import { delayedTasks } from '../../actors/reconciler/delays.js';
import { plan } from '../../actors/reconciler/plan.js';
import type { CapacityView, Decisions } from '../../actors/reconciler/decisions.js';
import { parseTagRates } from '../../actors/reconciler/tag-rates.js';
import type { TaskState } from '../../actors/task/task.machine.js';
import { TASK_STATES, tasksByState } from '../backend/storage/index.js';
import type { LiveEntry } from '../backend/reconciler/index.js';
import { openTasks, storeRoom } from '../backend/storage/index.js';
import type { EventsStoreUsage } from '../backend/storage/index.js';
import type { TaskProgress } from '../storage/task-progress.js';

/** `sonar status --json` (documented in docs/metrics.md). */
export interface StatusView {
  /** The clock the ages are measured against (this machine's). */
  now: string;
  /** The reconciler leader: who holds the `reconciler` lock, and since its `ReconcilerElected`. */
  leader: { nodeId: string | null; since: string | null };
  /** Live workers: registry keys that exist, oldest id first. */
  workers: {
    workerId: string;
    host: string;
    tags: string[];
    slots: number;
    /** `active`, `draining`, or `lost`/`left` for a key whose worker the log has ended. */
    state: 'active' | 'draining' | 'lost' | 'left';
    running: number;
    /** Age of its last pulse by the server's timestamp. */
    pulseAgeMs: number;
  }[];
  /** As the reconciler computes it (DESIGN.md section 5), negatives shown as 0. */
  capacity: CapacityView;
  /**
   * Rate-limited tags an eligible worker serves, with the publishes their bucket allows now
   * (`plan --json`'s `rateLimited`), by the rates the leader announced; absent when none.
   */
  rateLimited?: NonNullable<Decisions['rateLimited']>;
  /**
   * Tasks by state (zero counts left out) per run and step, steps in run-file order. A run
   * evicted by retention (`RunExpired`) keeps only its summary: `expired` is set, with its
   * times and reason, and `steps` is empty.
   */
  runs: Record<
    string,
    {
      state: string;
      tasks: Partial<Record<TaskState, number>>;
      steps: Record<
        string,
        {
          state: string;
          starved: boolean;
          tasks: Partial<Record<TaskState, number>>;
          /** Of its Pending tasks, those a notBefore still holds back; absent when none. */
          delayed?: number;
        }
      >;
      /** Of the run's Pending tasks, those a notBefore still holds back; absent when none. */
      delayed?: number;
      expired?: { submittedAt: string; endedAt: string; reason: string | null; at: string };
      /**
       * The latest progress of each Running task that reported any, of its current attempt,
       * by task id (`ctx.progress()`, docs/worker-protocol.md); of the first 1,000 Running tasks
       * of the run. Absent when none did.
       */
      progress?: Record<string, { value: unknown; at: string; attempt: number }>;
    }
  >;
  /** Ready steps with Pending tasks and no eligible worker for any of their tags. */
  starved: string[];
  /** Jobs in the `SONAR_FINALIZE` work queue (all runs). */
  finalizeQueue: number;
  /** Tasks held Poisoned (of `--run`, else of all runs). */
  poisoned: number;
  /**
   * The events stream's room (docs/operations.md, "Limits"): bytes stored, its bound (null: none), what
   * new work may still take after the share kept for open tasks (null: no bound), and `full`
   * when even a one-task run would be refused with `store_full`.
   */
  eventsStore?: { bytes: number; maxBytes: number | null; freeBytes: number | null; full: boolean };
}

export interface StatusInput {
  projection: Projection;
  entries: readonly LiveEntry[];
  now: number;
  planConfig: PlanConfig;
  finalizeQueue: number;
  /** The value of the `reconciler` key in `sonar_locks`, null when nobody holds it. */
  lockHolder: string | null;
  /** Only this run. */
  runId?: string;
  /** Every run, finished ones included (default: runs with work still open). */
  all?: boolean;
  /** The events stream's bytes and bound, as the server reports them. */
  eventsStore?: EventsStoreUsage;
  /** The latest progress stored per task, by run id (the runs shown; none: no progress). */
  progress?: ReadonlyMap<string, ReadonlyMap<string, TaskProgress>>;
}

const nonZero = (counts: Record<TaskState, number>): Partial<Record<TaskState, number>> => {
  const out: Partial<Record<TaskState, number>> = {};
  for (const s of TASK_STATES) if (counts[s] > 0) out[s] = counts[s];
  return out;
};

/**
 * Which runs to show: `--run`, `--all` (expired runs last), or those still Running or with
 * open tasks.
 */
function shownRuns(p: Projection, input: StatusInput): string[] {
  if (input.runId !== undefined) {
    return p.runs.has(input.runId) || p.expiredRuns.has(input.runId) ? [input.runId] : [];
  }
  if (input.all) return [...p.runs.keys(), ...p.expiredRuns.keys()];
  const open = new Set(p.activeRuns);
  for (const key of p.activeSteps) open.add(key.slice(0, key.indexOf('.')));
  return [...p.runs.keys()].filter((r) => open.has(r));
}

/**
 * The rates the planner of the last leader announced, unless the config sets some: a CLI
 * process rarely has the backend's SONAR_TAG_RATES, and the leader's are the ones in force.
 */
function withLeaderRates(p: Projection, config: PlanConfig): PlanConfig {
  const announced = p.leader?.tagRates;
  if (config.tagRates !== undefined || announced === undefined) return config;
  try {
    return { ...config, tagRates: parseTagRates(announced) };
  } catch (_err: unknown) {
    return config; // a value this build cannot read: shown without limits, as an older CLI would
  }
}

/** Builds the status from what the CLI read; pure, so it is tested without a server. */
export function statusView(input: StatusInput): StatusView {
  const p = input.projection;
  const running = new Map<string, number>();
  for (const key of p.tasksByState.Running) {
    const w = p.tasks.get(key)!.snapshot.context.workerId;
    if (w !== null) running.set(w, (running.get(w) ?? 0) + 1);
  }
  const decisions = plan(p, input.entries, input.now, withLeaderRates(p, input.planConfig));
  const runs: StatusView['runs'] = {};
  for (const runId of shownRuns(p, input)) {
    const expired = p.expiredRuns.get(runId);
    if (expired) {
      runs[runId] = {
        state: expired.state,
        tasks: { ...expired.tasks },
        steps: {},
        expired: {
          submittedAt: expired.submittedAt,
          endedAt: expired.endedAt,
          reason: expired.reason,
          at: expired.expiredAt,
        },
      };
      continue;
    }
    const run = p.runs.get(runId)!.snapshot;
    const steps: StatusView['runs'][string]['steps'] = {};
    let runDelayed = 0;
    for (const stepId of run.context.stepIds) {
      const step = p.steps.get(`${runId}.${stepId}`)?.snapshot;
      const counts = p.stepIndex.get(`${runId}.${stepId}`)?.counts;
      if (!step || !counts) continue;
      const delayed = delayedTasks(p, `${runId}.${stepId}`, input.now);
      runDelayed += delayed;
      steps[stepId] = {
        state: step.value,
        starved: step.context.starved,
        tasks: nonZero(counts),
        ...(delayed > 0 && { delayed }),
      };
    }
    const progress = runningProgress(p, runId, input.progress?.get(runId));
    runs[runId] = {
      state: run.value,
      tasks: nonZero(tasksByState(p, runId)),
      ...(runDelayed > 0 && { delayed: runDelayed }),
      steps,
      ...(progress && { progress }),
    };
  }
  const lockSince =
    input.lockHolder !== null && p.leader?.nodeId === input.lockHolder ? p.leader.time : null;
  return {
    now: new Date(input.now).toISOString(),
    leader: { nodeId: input.lockHolder, since: lockSince },
    workers: input.entries.map((e) => {
      const state = p.workers.get(e.workerId)?.snapshot.value;
      return {
        workerId: e.workerId,
        host: e.host,
        tags: [...e.tags],
        slots: e.slots,
        state:
          state === 'Lost'
            ? 'lost'
            : state === 'Left'
              ? 'left'
              : state === 'Draining' || !e.active
                ? 'draining'
                : 'active',
        running: running.get(e.workerId) ?? 0,
        pulseAgeMs: Math.max(0, input.now - Date.parse(e.pulseAt)),
      };
    }),
    capacity: decisions.capacity,
    ...(decisions.rateLimited && { rateLimited: decisions.rateLimited }),
    runs,
    starved: decisions.starved.filter(
      (key) => input.runId === undefined || key.startsWith(`${input.runId}.`),
    ),
    finalizeQueue: input.finalizeQueue,
    poisoned: tasksByState(p, input.runId).Poisoned,
    ...(input.eventsStore && { eventsStore: eventsStoreView(input.eventsStore, p) }),
  };
}

/** The stored progress of the run's Running tasks that belongs to their current attempt. */
function runningProgress(
  p: Projection,
  runId: string,
  stored: ReadonlyMap<string, TaskProgress> | undefined,
): StatusView['runs'][string]['progress'] {
  if (stored === undefined) return undefined;
  const out: NonNullable<StatusView['runs'][string]['progress']> = {};
  for (const [taskId, r] of stored) {
    const task = p.tasks.get(`${runId}.${taskId}`)?.snapshot;
    if (task?.value !== 'Running' || task.context.attempt !== r.attempt) continue;
    out[taskId] = { value: r.value, at: r.at, attempt: r.attempt };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function eventsStoreView(usage: EventsStoreUsage, p: Projection): StatusView['eventsStore'] {
  const room = storeRoom(usage, openTasks(p));
  return {
    bytes: room.bytes,
    maxBytes: room.maxBytes > 0 ? room.maxBytes : null,
    freeBytes: room.freeBytes,
    full: room.full === true,
  };
}
