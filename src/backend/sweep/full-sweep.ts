import { signalMetric } from '../../metrics.js';
import { finalizeMsgId } from '../../../streams/queues.js';
import { newId } from '../../ids.js';
import type { BackendContext } from '../context.js';
import { FailureLog } from '../finalize/index.js';
import { reenqueueLostFinalizations } from '../reconciler/index.js';
import { Poisoner } from '../finalize/index.js';
import { workersInService } from '../reconciler/index.js';
import type { LiveEntry } from '../reconciler/index.js';
import { loseVanishedWorkers } from './lost-workers.js';
import { deleteOrphanConsumers } from './orphan-consumers.js';
import type { OrphanConsumersReport } from './orphan-consumers.js';
import { applyRetention } from './retention.js';
import type { RetentionReport, RetentionSnapshots } from './retention.js';
import { snapshotRetention } from './snapshot-retention.js';
import { purgeStaleDispatches } from './stale-dispatch.js';
import type { StaleDispatchReport } from './stale-dispatch.js';
import { moveStuckJobs } from './stuck-jobs.js';
import type { StuckJobsReport } from './stuck-jobs.js';

/** What one full sweep found and fixed (the `sonar sweep --json` output). */
export interface SweepReport {
  /** The backend (or `sonar sweep` process) that swept. */
  by: string;
  startedAt: string;
  ms: number;
  staleDispatch: StaleDispatchReport;
  /** Finalizing tasks whose job was missing, re-enqueued (`<runId>.<taskId>`). */
  lostFinalizations: { reenqueued: string[] };
  stuckJobs: StuckJobsReport;
  orphanConsumers: OrphanConsumersReport;
  /** Joined workers whose registry key was gone, now WorkerLost{reason:'expired'}. */
  lostWorkers: { lost: string[] };
  retention: RetentionReport;
  /** Repairs that failed; the others still ran, and the next sweep tries again. */
  failed: { repair: string; error: string }[];
}

export interface FullSweepOptions {
  /**
   * Where retention keeps the final state of the runs it purges; null: retention purges
   * nothing and says so (`retention.skipped`).
   * @defaultValue the projection snapshot in `sonar_snapshots` (sweep/snapshot-retention.ts)
   */
  snapshots?: RetentionSnapshots | null;
}

const emptyReport = (by: string, startedAt: string): SweepReport => ({
  by,
  startedAt,
  ms: 0,
  staleDispatch: { checked: 0, purged: 0 },
  lostFinalizations: { reenqueued: [] },
  stuckJobs: { stuck: 0, poisoned: 0, dropped: 0, unidentified: 0 },
  orphanConsumers: { checked: 0, deleted: [] },
  lostWorkers: { lost: [] },
  retention: {
    expired: 0,
    purged: [],
    evicted: [],
    workersEvicted: [],
    open: 0,
    skipped: null,
    snapshotSeq: null,
  },
  failed: [],
});

/** The repairs of one sweep, in the order they run. */
export const REPAIRS = [
  'registry',
  'lostWorkers',
  'staleDispatch',
  'lostFinalizations',
  'stuckJobs',
  'orphanConsumers',
  'retention',
] as const;
export type Repair = (typeof REPAIRS)[number];

/** Told as each repair begins: its name, how many began before it, and how many there are. */
export type RepairProgress = (repair: Repair, done: number, of: number) => void;

/**
 * The full sweep: what falls outside every reconcile tick's view, once per
 * SONAR_FULL_SWEEP across the fleet (the Sweeper claims the turn; `sonar sweep` runs one by
 * hand). Each repair is its own module under sweep/ and is safe to run beside the reconciler,
 * the finalizers and another sweep: every write is fenced by attempt, sequence or dedupe.
 * A repair that fails is reported and the others still run.
 */
export class FullSweep {
  private constructor(
    private readonly ctx: BackendContext,
    private readonly failures: FailureLog,
    private readonly poisoner: Poisoner,
    private readonly snapshots: RetentionSnapshots | null,
  ) {}

  static async open(ctx: BackendContext, opts: FullSweepOptions = {}): Promise<FullSweep> {
    const failures = await FailureLog.open(ctx.nc, ctx.names);
    const poisoner = new Poisoner({
      names: ctx.names,
      store: ctx.store,
      loop: ctx.loop,
      writer: ctx.writer,
      now: ctx.now,
      js: ctx.js,
      failures,
      log: ctx.log.child({ component: 'sweep' }),
      nodeId: ctx.nodeId,
    });
    const snapshots = opts.snapshots === undefined ? snapshotRetention(ctx) : opts.snapshots;
    return new FullSweep(ctx, failures, poisoner, snapshots);
  }

  /**
   * One pass of every repair; logs one info line with what it found and fixed. Once `signal`
   * aborts (the backend is stopping), the repairs not yet begun are skipped. `onRepair` is
   * told as each begins (an operator's `sonar sweep` shows it).
   */
  async run(signal?: AbortSignal, onRepair?: RepairProgress): Promise<SweepReport> {
    const { ctx } = this;
    const log = ctx.log.child({ component: 'sweep' });
    const started = performance.now();
    const r = emptyReport(ctx.nodeId, new Date(ctx.now()).toISOString());
    let begun = 0;
    const attempt = async (repair: Repair, fn: () => Promise<void>): Promise<void> => {
      if (signal?.aborted) return;
      onRepair?.(repair, begun++, REPAIRS.length);
      try {
        await fn();
      } catch (err: unknown) {
        const error = err instanceof Error ? err.message : String(err);
        r.failed.push({ repair, error });
        log.warn('sweep repair failed', { repair, err });
      }
    };
    let entries: LiveEntry[] = [];
    await attempt('registry', async () => {
      entries = await ctx.registry.live(workersInService(ctx.loop.projection));
    });
    const registryRead = !r.failed.some((f) => f.repair === 'registry');
    if (!registryRead) ctx.contact.noteFailure();
    // Without the registry every worker would look gone: those two repairs wait for next time.
    // So they do for a pulse TTL after an outage: no worker could pulse during it.
    const steady = ctx.contact.steadyForMs() >= ctx.config.pulseTtlMs;
    if (registryRead && !steady) log.info('lost workers not judged: the server was out of reach');
    await attempt('lostWorkers', async () => {
      if (registryRead && steady) r.lostWorkers.lost = await loseVanishedWorkers(ctx, entries);
    });
    await attempt('staleDispatch', async () => {
      r.staleDispatch = await purgeStaleDispatches(ctx);
    });
    await attempt('lostFinalizations', async () => {
      // An id of its own: a job the reconciler re-enqueued (and that was since lost) inside
      // the dedupe window must not swallow this one. A duplicate job is a no-op.
      const sweepId = newId();
      r.lostFinalizations.reenqueued = await reenqueueLostFinalizations(
        { jsm: ctx.jsm, js: ctx.js, names: ctx.names, projection: ctx.loop.projection },
        ctx.now(),
        ctx.config.finalizeLeaseMs,
        {
          msgId: (job, round) => `${finalizeMsgId(job, round)}.sweep-${sweepId}`,
        },
      );
    });
    await attempt('stuckJobs', async () => {
      r.stuckJobs = await moveStuckJobs(ctx, { failures: this.failures, poisoner: this.poisoner });
    });
    await attempt('orphanConsumers', async () => {
      if (registryRead && steady) r.orphanConsumers = await deleteOrphanConsumers(ctx, entries);
    });
    await attempt('retention', async () => {
      r.retention = await applyRetention(ctx, this.snapshots);
    });
    if (r.stuckJobs.unidentified > 0) {
      // Their MAX_DELIVERIES advisory (if it comes) or an operator deals with them.
      log.warn('finalize jobs stuck past max_deliver could not be identified', {
        count: r.stuckJobs.unidentified,
      });
    }
    r.ms = Math.round(performance.now() - started);
    const summary = summaryOf(r);
    log.info('full sweep done', summary);
    signalMetric({ kind: 'sweep', nodeId: ctx.nodeId, counts: summary });
    return r;
  }
}

/** The report as flat counts: the log line's fields (and a metrics exporter's). */
export function summaryOf(r: SweepReport): Record<string, number | string | null> {
  return {
    ms: r.ms,
    workersLost: r.lostWorkers.lost.length,
    dispatchChecked: r.staleDispatch.checked,
    dispatchPurged: r.staleDispatch.purged,
    finalizationsReenqueued: r.lostFinalizations.reenqueued.length,
    jobsStuck: r.stuckJobs.stuck,
    jobsPoisoned: r.stuckJobs.poisoned,
    jobsDropped: r.stuckJobs.dropped,
    jobsUnidentified: r.stuckJobs.unidentified,
    consumersDeleted: r.orphanConsumers.deleted.length,
    runsExpired: r.retention.expired,
    runsPurged: r.retention.purged.length,
    runsEvicted: r.retention.evicted.length,
    workersEvicted: r.retention.workersEvicted.length,
    retentionSkipped: r.retention.skipped,
    repairsFailed: r.failed.length,
  };
}
