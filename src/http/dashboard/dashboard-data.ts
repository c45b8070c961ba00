import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { keyOf } from '../../../actors/ids.js';
import type { EventRecord } from '../../../actors/projection.js';
import type { BackendContext } from '../../backend/context.js';
import { RECONCILER_LOCK } from '../../backend/reconciler/index.js';
import type { PoisonedAdmin } from '../../backend/finalize/index.js';
import type { RegistryEntry } from '../../protocol.js';
import { buildOverview } from './views/overview-view.js';
import type { OverviewView } from './views/overview-view.js';
import { buildPoisoned } from './views/poisoned-view.js';
import { buildRunDetail, buildRunList } from './views/runs-view.js';
import type { RunDetail, RunSummary } from './views/runs-view.js';
import { buildTaskView } from './views/task-view.js';
import type { TaskView } from './views/task-view.js';
import { lastLogChunk } from '../../storage/task-logs.js';
import { listSchedules } from '../../schedules/schedule-info.js';
import type { ScheduleInfo } from '../../schedules/schedule-info.js';
import { ProgressStore } from '../../storage/task-progress.js';
import type { TaskProgress } from '../../storage/task-progress.js';

/** Reading the registry costs one KV get per worker: pages opened together share one read. */
const REGISTRY_CACHE_MS = 1_000;
/** What a task's current attempt reported besides events: its progress and its log. */
export interface TaskReports {
  /** Its latest progress, of this attempt; null when it reported none. */
  progress: TaskProgress | null;
  /** The end of its log; `cut` when more was stored or dropped before it. */
  log: { attempt: number; text: string; cut: boolean } | null;
}

/** Runs whose step events are kept (the pages being watched, in practice). */
const STEP_CACHE_RUNS = 64;

/**
 * What the pages and the read API show, read from this backend's own projection (no extra
 * replay), plus the few things that are not events: the registry (pulses), the reconciler
 * lock, the finalize queue's depth, a run's step events and a task's history.
 */
export class DashboardData {
  private registryRead: { at: number; entries: Promise<RegistryEntry[]> } | null = null;
  /**
   * Each run's step events, read once and kept until a step event of that run is applied: a
   * busy run's page re-renders on every task change, and its steps rarely change.
   */
  private readonly stepEvents = new Map<string, EventRecord[]>();
  private readonly unsubscribe: () => void;
  private progressStore: Promise<ProgressStore | null> | null = null;

  constructor(
    private readonly ctx: BackendContext,
    private readonly locks: KV,
    readonly admin: PoisonedAdmin,
  ) {
    this.unsubscribe = ctx.loop.onApplied(({ ref, event }) => {
      if (ref.kind === 'step') this.stepEvents.delete(ref.key.slice(0, ref.key.indexOf('.')));
      else if (event.type === 'RunSubmitted' || event.type === 'RunExpired') {
        this.stepEvents.delete(ref.key);
      }
    });
  }

  close(): void {
    this.unsubscribe();
  }

  static async open(ctx: BackendContext, admin: PoisonedAdmin): Promise<DashboardData> {
    return new DashboardData(ctx, await new Kvm(ctx.nc).open(ctx.names.buckets.locks), admin);
  }

  /** Every schedule not deleted, with its next due time and last runs. */
  schedules(): ScheduleInfo[] {
    return listSchedules(this.ctx.loop.projection, this.ctx.now());
  }

  async overview(): Promise<OverviewView> {
    const { ctx } = this;
    const [registry, finalizeQueue, lockHolder] = await Promise.all([
      this.registry(),
      this.finalizeDepth(),
      this.lockHolder(),
    ]);
    return buildOverview({
      projection: ctx.loop.projection,
      registry,
      now: ctx.now(),
      pulseTtlMs: ctx.config.pulseTtlMs,
      capacityMultiplier: ctx.config.capacityMultiplier,
      finalizeQueue,
      lockHolder,
    });
  }

  runs(limit: number): RunSummary[] {
    return buildRunList(this.ctx.loop.projection, limit, this.ctx.now());
  }

  async run(runId: string, taskLimit: number): Promise<RunDetail | null> {
    const { ctx } = this;
    if (ctx.loop.projection.expiredRuns.has(runId)) {
      return buildRunDetail(ctx.loop.projection, runId, [], taskLimit, ctx.now());
    }
    if (!ctx.loop.projection.runs.has(runId)) return null;
    let stepEvents = this.stepEvents.get(runId);
    if (!stepEvents) {
      // `<prefix>.events.step.<runId>.*`: a handful of events per step, for the timeline.
      stepEvents = await ctx.store.readAggregate(ctx.names.subjects.runAll(runId)[1]!);
      // A step event applied during the read would be missing: cache only a quiet read.
      if (ctx.loop.projection.runs.has(runId) && !this.changedSince(runId, stepEvents)) {
        if (this.stepEvents.size >= STEP_CACHE_RUNS) {
          this.stepEvents.delete(this.stepEvents.keys().next().value!);
        }
        this.stepEvents.set(runId, stepEvents);
      }
    }
    return buildRunDetail(ctx.loop.projection, runId, stepEvents, taskLimit, ctx.now());
  }

  /** A task's state and its full history, straight from its subject. Null when unknown. */
  async task(runId: string, taskId: string): Promise<TaskView | null> {
    const { ctx } = this;
    const key = keyOf(runId, taskId);
    if (!ctx.loop.projection.tasks.has(key)) return null;
    const records = await ctx.store.readAggregate(ctx.names.subjects.task(runId, taskId));
    // Read after the history, so the state is at least as new as the last event shown.
    const snap = ctx.loop.projection.tasks.get(key)!.snapshot;
    return buildTaskView(key, snap, records);
  }

  /**
   * The progress and the end of the log of the task's attempt `attempt` (0: none yet): its
   * newest log chunk only, one read, so a page view costs the backend little however long
   * the log. Neither ever fails the page.
   */
  async taskReports(runId: string, taskId: string, attempt: number): Promise<TaskReports> {
    if (attempt === 0) return { progress: null, log: null };
    const { ctx } = this;
    this.progressStore ??= ProgressStore.open(ctx.nc, ctx.names).catch(() => null);
    const [store, chunk] = await Promise.all([
      this.progressStore,
      lastLogChunk(ctx.jsm, ctx.names, { runId, taskId, attempt }),
    ]);
    const progress = (await store?.get(runId, taskId)) ?? null;
    const text = chunk.map((c) => c.text).join('');
    const cut = chunk.some((c) => c.seq > 1 || c.dropped > 0);
    return {
      progress: progress?.attempt === attempt ? progress : null,
      log: chunk.length === 0 ? null : { attempt, text, cut },
    };
  }

  /** Whether the projection holds a step event of the run newer than the records read. */
  private changedSince(runId: string, read: readonly EventRecord[]): boolean {
    const last = read.length === 0 ? 0 : read[read.length - 1]!.seq;
    const run = this.ctx.loop.projection.runs.get(runId)!.snapshot.context;
    return run.stepIds.some(
      (id) => (this.ctx.loop.projection.steps.get(`${runId}.${id}`)?.seq ?? 0) > last,
    );
  }

  poisoned(limit: number, runId?: string) {
    return buildPoisoned(this.admin, limit, runId);
  }

  get poisonedCount(): number {
    return this.ctx.loop.projection.tasksByState.Poisoned.size;
  }

  private registry(): Promise<RegistryEntry[]> {
    const now = performance.now();
    if (this.registryRead === null || now - this.registryRead.at > REGISTRY_CACHE_MS) {
      const entries = this.ctx.registry.live();
      this.registryRead = { at: now, entries };
      // A failed read is not cached: the next page asks again.
      entries.catch(() => {
        if (this.registryRead?.entries === entries) this.registryRead = null;
      });
    }
    return this.registryRead.entries;
  }

  private async finalizeDepth(): Promise<number | null> {
    try {
      const info = await this.ctx.jsm.streams.info(this.ctx.names.streams.finalize);
      return info.state.messages;
    } catch (_err: unknown) {
      return null;
    }
  }

  private async lockHolder(): Promise<string | null> {
    try {
      const e = await this.locks.get(RECONCILER_LOCK);
      return e && e.operation === 'PUT' ? e.string() : null;
    } catch (_err: unknown) {
      return null;
    }
  }
}
