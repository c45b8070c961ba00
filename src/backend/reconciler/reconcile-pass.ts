import { IllegalTransitionError, isSonarError } from '../../../actors/errors.js';
import type { PlanConfig } from '../../../actors/reconciler/config.js';
import type { Decisions, ReconcilerEvent } from '../../../actors/reconciler/decisions.js';
import type { LiveWorker } from '../../../actors/reconciler/fleet.js';
import { plan } from '../../../actors/reconciler/plan.js';
import { progress } from '../../../actors/reconciler/progress.js';
import { recoveryEvents } from '../../../actors/reconciler/recovery.js';
import { starvationEvents } from '../../../actors/reconciler/starvation.js';
import { vanishedWorkers } from '../../../actors/reconciler/vanished-workers.js';
import type { SonarConfig } from '../../config.js';
import type { Logger } from '../../log.js';
import { fenceOff } from '../sweep/index.js';
import type { BackendContext } from '../context.js';
import type { DecisionOutcome, DecisionWriter } from '../projection/index.js';
import { DISPATCH_ACK_WAIT_MS } from '../../../streams/topology.js';
import { inParallel } from '../in-parallel.js';
import { undeliveredAttempts } from './dispatch-audit.js';
import { reenqueueLostFinalizations } from './lost-finalizations.js';
import type { BatchedTasks } from './lost-finalizations.js';

/** Publishes one placement: mints an attempt, appends TaskPublished, sends the message. */
export type Dispatch = (ctx: BackendContext, taskKey: string, tag: string) => Promise<unknown>;

/** The backend's settings as the pure planner reads them. */
export function planConfigOf(
  config: SonarConfig,
  ageFloorPassed: boolean,
  steadyContactMs?: number,
): PlanConfig {
  return {
    publishTimeoutMs: config.publishTimeoutMs,
    orphanAgeMs: config.orphanAgeMs,
    recoveryLimit: config.recoveryLimit,
    recoveryWindowMs: config.recoveryWindowMs,
    capacityMultiplier: config.capacityMultiplier,
    batch: config.dispatchBatch,
    pulseTtlMs: config.pulseTtlMs,
    ageFloorPassed,
    priorityAgingMs: config.priorityAgingMs,
    ...(config.tagRates && { tagRates: config.tagRates }),
    ...(steadyContactMs !== undefined && {
      steadyContactMs,
      dispatchAckWaitMs: DISPATCH_ACK_WAIT_MS,
    }),
  };
}

export interface PassInput {
  /** The registry as last read (`pulseAt` = server time). */
  entries: readonly LiveWorker[];
  /** A full tick (also loses vanished workers and re-enqueues lost finalizations). */
  full: boolean;
  ageFloorPassed: boolean;
  /** How long this backend has been in steady contact with the server (publish timeouts). */
  steadyContactMs?: number;
}

/** What one pass did, for logs and tests. */
export interface PassSummary {
  requeued: number;
  dead: number;
  published: number;
  starvation: number;
  lostWorkers: number;
  reenqueued: number;
  progressed: number;
  /** Decisions dropped because their aggregate moved or the machine refused them. */
  dropped: number;
  decisions: Decisions | null;
}

/** Re-plans after recoveries at most this often in one pass before leaving it to the next. */
const MAX_PLAN_ROUNDS = 3;
/** Applies progress at most this many times in one pass (each round walks one link further). */
const MAX_PROGRESS_ROUNDS = 8;

const parts = (key: string) => {
  const dot = key.indexOf('.');
  return { runId: key.slice(0, dot), id: key.slice(dot + 1) };
};

/**
 * Carries out one reconcile pass for the leader (DESIGN.md sections 4, 5 and 7): judge with
 * the pure planner, then append what it decided, each decision only onto the state it was
 * judged on (DecisionWriter); a decision whose aggregate moved is dropped and judged afresh.
 *
 * Order: requeues and deaths first, then a fresh plan on the new state for placement, so a
 * publish never counts on capacity a failed requeue did not free; then starvation flags,
 * vanished workers and lost finalization jobs (full ticks), then step and run completion.
 * Every write first checks `isLeader()`: a leader whose lease is running out stops mid-pass.
 */
export class ReconcilePass {
  /** The last `pulseAt` seen per worker, for `WorkerLost.lastPulseAt` once its key is gone. */
  private readonly lastPulse = new Map<string, string>();
  /** The tasks of queued finalization batches, read once each. */
  private readonly finalizeBatches: BatchedTasks = new Map();
  /** Whether the next pass looks for the dispatch messages of Published tasks first. */
  private auditWanted = false;
  /** Attempts found without a dispatch message, until their task leaves them. */
  private undelivered = new Set<string>();

  constructor(
    private readonly ctx: BackendContext,
    private readonly writer: DecisionWriter,
    private readonly deps: {
      isLeader: () => boolean;
      now: () => number;
      dispatch: Dispatch;
      concurrency: number;
      log: Logger;
    },
  ) {}

  /**
   * Makes the next pass look for every Published task's dispatch message before judging:
   * a new leader does not know which of its predecessor's sends were carried out.
   */
  auditDispatch(): void {
    this.auditWanted = true;
  }

  async run(input: PassInput): Promise<PassSummary> {
    const summary: PassSummary = {
      requeued: 0,
      dead: 0,
      published: 0,
      starvation: 0,
      lostWorkers: 0,
      reenqueued: 0,
      progressed: 0,
      dropped: 0,
      decisions: null,
    };
    for (const e of input.entries) this.lastPulse.set(e.workerId, e.pulseAt);
    const config = planConfigOf(this.ctx.config, input.ageFloorPassed, input.steadyContactMs);
    await this.recoverAndPlace(input, config, summary);
    if (input.full) {
      await this.loseVanishedWorkers(input, config, summary);
      await this.reenqueueLostFinalizations(summary);
    }
    await this.progress(summary);
    return summary;
  }

  private async audit(): Promise<void> {
    const p = this.ctx.loop.projection;
    if (this.auditWanted && this.deps.isLeader()) {
      try {
        this.undelivered = await undeliveredAttempts(this.ctx);
        this.auditWanted = false;
        if (this.undelivered.size > 0) {
          this.deps.log.warn('published tasks without a dispatch message found', {
            tasks: this.undelivered.size,
          });
        }
      } catch (err: unknown) {
        this.deps.log.warn('dispatch messages not looked for: again next pass', { err });
      }
    }
    if (this.undelivered.size === 0) return;
    const current = new Set<string | null>();
    for (const key of p.tasksByState.Published)
      current.add(p.tasks.get(key)!.snapshot.context.attemptId);
    for (const attemptId of this.undelivered) {
      if (!current.has(attemptId)) this.undelivered.delete(attemptId);
    }
  }

  private async recoverAndPlace(input: PassInput, config: PlanConfig, summary: PassSummary) {
    const p = this.ctx.loop.projection;
    await this.audit();
    for (let round = 0; round < MAX_PLAN_ROUNDS && this.deps.isLeader(); round++) {
      const decisions = plan(p, input.entries, this.deps.now(), config, this.undelivered);
      summary.decisions = decisions;
      const recoveries = recoveryEvents(p, decisions);
      if (recoveries.length === 0) {
        await this.publish(decisions.publish, summary);
        await this.flagStarvation(decisions.starved, summary);
        return;
      }
      const outcomes = await this.writeAll(recoveries, summary, (e) => {
        if (e.type === 'TaskDead') {
          summary.dead++;
          this.deps.log.warn('task dead', { ...taskMeta(e), recoveries: e.data.recoveries });
        } else if (e.type === 'TaskRequeued') {
          summary.requeued++;
          this.deps.log.info('task requeued', {
            ...taskMeta(e),
            attemptId: e.data.attemptId,
            reason: e.data.reason,
            recoveries: e.data.recoveries,
          });
        }
      });
      // Placement would count on capacity a dropped requeue did not free: next tick.
      if (outcomes.some((o) => o !== 'written')) return;
    }
  }

  private async publish(placements: Decisions['publish'], summary: PassSummary): Promise<void> {
    if (placements.length === 0 || !this.deps.isLeader()) return;
    for (const tag of new Set(placements.map((x) => x.tag))) {
      await this.ctx.dispatchConsumers.ensure(tag);
    }
    const results = await inParallel(placements, this.deps.concurrency, async ({ task, tag }) => {
      if (!this.deps.isLeader()) return false;
      await this.deps.dispatch(this.ctx, task, tag);
      return true;
    });
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') {
        if (r.value) summary.published++;
        return;
      }
      summary.dropped++;
      const { task, tag } = placements[i]!;
      // The task moved on (cancelled, published by a former leader): judged again next tick.
      const expected = r.reason instanceof IllegalTransitionError || isSonarError(r.reason);
      // A write or send that failed may have left a Published task without a message.
      if (!(r.reason instanceof IllegalTransitionError)) this.auditWanted = true;
      this.deps.log[expected ? 'debug' : 'warn']('dispatch skipped', {
        task,
        tag,
        err: r.reason,
      });
    });
  }

  private async flagStarvation(starved: string[], summary: PassSummary): Promise<void> {
    const events = starvationEvents(this.ctx.loop.projection, starved);
    await this.writeAll(events, summary, (e) => {
      summary.starvation++;
      const { runId, id: stepId } = parts(e.ref.key);
      if (e.type === 'StepStarved') {
        this.deps.log.warn('step starved: no eligible worker for its tags', {
          runId,
          stepId,
          tags: e.data.tags,
        });
      } else {
        this.deps.log.info('step served', { runId, stepId });
      }
    });
  }

  private async loseVanishedWorkers(input: PassInput, config: PlanConfig, summary: PassSummary) {
    const p = this.ctx.loop.projection;
    const events = vanishedWorkers(p, input.entries, this.deps.now(), config).map(
      (e): ReconcilerEvent =>
        e.type === 'WorkerLost'
          ? { ...e, data: { ...e.data, lastPulseAt: this.lastPulse.get(e.ref.key) ?? null } }
          : e,
    );
    await this.writeAll(events, summary, (e) => {
      summary.lostWorkers++;
      this.deps.log.warn('worker lost: its registry key expired', { workerId: e.ref.key });
      if (e.type === 'WorkerLost') void fenceOff(this.ctx, e.ref.key);
    });
    // A key whose worker the log has ended (its fence-off delete failed, or the worker put
    // its key back after an outage just before it was declared Lost): delete it again, so
    // that the worker's next pulse asks and learns it is gone.
    for (const e of input.entries) {
      if (p.workers.get(e.workerId)?.snapshot.value === 'Lost') void fenceOff(this.ctx, e.workerId);
    }
    // Forget the workers that are gone for good (Left or Lost), so churn does not pile up.
    for (const workerId of this.lastPulse.keys()) {
      if (p.workers.get(workerId)?.snapshot.status === 'done') this.lastPulse.delete(workerId);
    }
  }

  private async reenqueueLostFinalizations(summary: PassSummary): Promise<void> {
    if (!this.deps.isLeader()) return;
    const { ctx } = this;
    const keys = await reenqueueLostFinalizations(
      { jsm: ctx.jsm, js: ctx.js, names: ctx.names, projection: ctx.loop.projection },
      this.deps.now(),
      ctx.config.finalizeLeaseMs,
      { batches: this.finalizeBatches },
    );
    summary.reenqueued += keys.length;
    for (const key of keys) {
      const { runId, id: taskId } = parts(key);
      this.deps.log.warn('finalization job re-enqueued: none was queued', { runId, taskId });
    }
  }

  private async progress(summary: PassSummary): Promise<void> {
    const p = this.ctx.loop.projection;
    for (let round = 0; round < MAX_PROGRESS_ROUNDS; round++) {
      const events = progress(p);
      if (events.length === 0) return;
      // Tasks in flight that a skip cancels are told to stop (DESIGN.md section 6, step 5).
      const inFlight = new Set(
        events
          .filter((e) => e.type === 'TaskCancelled')
          .filter((e) => ['Published', 'Running'].includes(p.tasks.get(e.ref.key)!.snapshot.value))
          .map((e) => e.ref.key),
      );
      const outcomes = await this.writeAll(events, summary, (e) => {
        summary.progressed++;
        if (e.type === 'TaskCancelled') {
          if (inFlight.has(e.ref.key)) this.cancelInFlight(e.ref.key);
          return;
        }
        const { runId, id: stepId } = parts(e.ref.key);
        const meta = e.ref.kind === 'run' ? { runId: e.ref.key } : { runId, stepId };
        this.deps.log.info(`${e.ref.kind} ${e.type.replace(/^(Step|Run)/, '').toLowerCase()}`, {
          ...meta,
          ...('reason' in e.data ? { reason: e.data.reason } : {}),
        });
      });
      if (!outcomes.includes('written')) return;
    }
  }

  private cancelInFlight(taskKey: string): void {
    const { runId, id: taskId } = parts(taskKey);
    const body = new TextEncoder().encode(JSON.stringify({ runId, taskId }));
    this.ctx.nc.publish(this.ctx.names.subjects.controlCancel, body);
  }

  /** Writes each event while still leader; `onWritten` runs for each appended one. */
  private async writeAll(
    events: ReconcilerEvent[],
    summary: PassSummary,
    onWritten: (e: ReconcilerEvent) => void,
  ): Promise<DecisionOutcome[]> {
    if (events.length === 0) return [];
    const results = await inParallel(events, this.deps.concurrency, async (e) =>
      this.deps.isLeader() ? this.writer.write(e) : ('moved' as const),
    );
    return results.map((r, i) => {
      const e = events[i]!;
      if (r.status === 'rejected') {
        summary.dropped++;
        this.deps.log.warn('decision not written', { type: e.type, key: e.ref.key, err: r.reason });
        return 'conflict';
      }
      if (r.value === 'written') onWritten(e);
      else {
        summary.dropped++;
        this.deps.log.debug('decision dropped', { type: e.type, key: e.ref.key, outcome: r.value });
      }
      return r.value;
    });
  }
}

function taskMeta(e: ReconcilerEvent): { runId: string; taskId: string } {
  const { runId, id } = parts(e.ref.key);
  return { runId, taskId: id };
}
