import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { dueTimesOf } from '../../schedules/due-times.js';
import type { DueTimes } from '../../schedules/due-times.js';
import { isOwedFull, isRunOpen, nextFire, owedRuns } from '../../schedules/next-fire.js';
import { ErrorCode, isSonarError } from '../../../actors/errors.js';
import { runIdsOf } from '../../../actors/schedule/schedule.machine.js';
import type { ScheduleContext } from '../../../actors/schedule/schedule.machine.js';
import type { Logger } from '../../log.js';
import type { Component } from '../backend.js';
import type { BackendContext } from '../context.js';
import { RECONCILER_LOCK } from '../reconciler/index.js';
import { StragglerGuard } from '../straggler-guard.js';
import { writeFire } from './fire-writer.js';
import { RETRY_AFTER_MS, RunSubmitter } from './run-submitter.js';
import { SubmitQueue } from './submit-queue.js';
import type { SubmitJob } from './submit-queue.js';

export interface ScheduleFirerOptions {
  /**
   * How often the firer looks for due times (ms): a run starts at most this late.
   * @defaultValue 500
   */
  checkMs?: number;
}

/** Fires one schedule makes in one check at most: a long catch-up goes on at the next. */
const MAX_FIRES_PER_CHECK = 20;

/**
 * Fires all schedules make in one check at most; each check starts one schedule further on,
 * so that schedules late in the list are not starved by a few with long catch-ups.
 */
const MAX_FIRES_PER_PASS = 200;

/** Submits going at once, and waiting at most, off the firing pass. */
const SUBMIT_LANES = 4;
const SUBMIT_QUEUE_CAPACITY = 1000;

/** How often the leader looks for fired runs the log does not hold (a failed or cut submit). */
const SWEEP_MS = RETRY_AFTER_MS / 2;

/** A schedule that keeps failing is logged at most this often. */
const WARN_EVERY_MS = 60_000;

/**
 * Fires schedules (docs/schedules.md) as a backend component. Every backend runs one; only
 * the holder of the reconciler's lock fires, read from `sonar_locks` at each check.
 *
 * Exactly once per due time rests on the log, not on the lock: each fire is a `ScheduleFired`
 * appended with the schedule's last sequence as the expectation (fire-writer.ts), and the
 * schedule machine refuses a due time at or before its cursor. Two backends that both think
 * they lead for a moment cannot both fire a due time, and a new leader starts from the cursor
 * the log holds, so a failover neither fires a due time twice nor skips one (unless the fleet
 * had no leader for longer than the schedule's `missedAfter`: then catch-up decides).
 *
 * Runs are submitted off the firing pass, through a bounded queue: a fire is appended, then
 * its run queued. Every few seconds the leader sweeps the runs every schedule (deleted ones
 * too) fired and the log does not hold, and queues them again: a failed submit is retried
 * until the run exists or is refused for good, which is recorded as `ScheduleRunRefused`.
 * One schedule's failure (an append, its due times) is logged with its name and skipped; the
 * others fire on.
 */
export class ScheduleFirer implements Component {
  readonly name = 'schedules';
  private readonly log: Logger;
  private readonly checkMs: number;
  private readonly stopping = new StragglerGuard('schedules');
  private readonly dueTimes = new Map<string, { spec: ScheduleContext; due: DueTimes }>();
  private locks: KV | null = null;
  private submitter: RunSubmitter | null = null;
  private readonly queue = new SubmitQueue((job) => this.submitJob(job), {
    concurrency: SUBMIT_LANES,
    capacity: SUBMIT_QUEUE_CAPACITY,
  });
  private sweptAt = 0;
  private offset = 0;
  private readonly warnedAt = new Map<string, number>();
  /** When each schedule's catch-up under way began: its fires judge missed due times then. */
  private readonly catchUpSince = new Map<string, number>();
  /** Runs of deleted schedules refused for good: no event can record it, so not retried here. */
  private readonly givenUp = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Fires this backend appended (tests, status). */
  readonly stats = { fired: 0, lostRaces: 0, refused: 0, failures: 0 };

  constructor(
    private readonly ctx: BackendContext,
    opts: ScheduleFirerOptions = {},
  ) {
    this.log = ctx.log.child({ component: 'schedules' });
    this.checkMs = opts.checkMs ?? 500;
  }

  /** @throws StillStoppingError while a check of the last run is still going. */
  async start(): Promise<void> {
    this.stopping.assertIdle();
    this.stopped = false;
    this.locks = await new Kvm(this.ctx.nc).open(this.ctx.names.buckets.locks);
    this.submitter = new RunSubmitter(this.ctx, this.log);
    this.queue.restart();
    this.sweptAt = 0;
    this.catchUpSince.clear();
    this.timer = setInterval(() => this.check(), this.checkMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.stopping.track(Promise.all([this.running ?? Promise.resolve(), this.queue.stop()]));
  }

  private check(): void {
    if (this.running || this.stopped) return;
    this.running = this.checkNow()
      .catch((err: unknown) => this.log.warn('schedule check failed', { err }))
      .finally(() => {
        this.running = null;
      });
  }

  /** Whether this backend holds the reconciler's lock now. */
  private async leads(): Promise<boolean> {
    const e = await this.locks!.get(RECONCILER_LOCK);
    return e?.operation === 'PUT' && e.string() === this.ctx.nodeId;
  }

  private async checkNow(): Promise<void> {
    const p = this.ctx.loop.projection;
    if (p.schedules.size === 0 || !(await this.leads())) return;
    const now = this.ctx.now();
    if (now - this.sweptAt >= SWEEP_MS) {
      this.sweptAt = now;
      this.sweep();
    }
    const names = [...p.schedules.keys()];
    this.offset = (this.offset + 1) % names.length;
    let budget = MAX_FIRES_PER_PASS;
    for (let i = 0; i < names.length && budget > 0; i++) {
      if (this.stopped) return;
      const name = names[(this.offset + i) % names.length]!;
      if (p.schedules.get(name)?.snapshot.value !== 'Active') {
        this.catchUpSince.delete(name);
        continue;
      }
      try {
        budget -= await this.fireDue(name, Math.min(budget, MAX_FIRES_PER_CHECK));
      } catch (err: unknown) {
        this.stats.failures++;
        this.warn(name, 'schedule not fired', { err });
      }
    }
  }

  /** Queues every run a schedule fired that the log does not hold, and may be tried now. */
  private sweep(): void {
    const p = this.ctx.loop.projection;
    const owed = new Set<string>();
    for (const [name, entry] of p.schedules) {
      for (const runId of owedRuns(p, entry.snapshot.context)) {
        owed.add(runId);
        if (this.queue.full || this.givenUp.has(runId) || this.submitter!.isWaiting(runId)) {
          continue; // a full queue: the next sweep goes on
        }
        this.queue.offer({ schedule: name, runId });
      }
    }
    this.submitter!.retainOnly(owed);
    for (const name of this.catchUpSince.keys()) {
      if (!p.schedules.has(name)) this.catchUpSince.delete(name);
    }
  }

  /** Fires what is due of one schedule, one `ScheduleFired` at a time; says how many. */
  private async fireDue(name: string, max: number): Promise<number> {
    const p = this.ctx.loop.projection;
    let n = 0;
    while (n < max && !this.stopped) {
      const entry = p.schedules.get(name);
      if (!entry || entry.snapshot.value !== 'Active') return n;
      const s = entry.snapshot.context;
      const now = this.ctx.now();
      const missedAsOf = this.catchUpSince.get(name) ?? now;
      const lastRunOpen = s.lastRun !== null && isRunOpen(p, s, s.lastRun.runId);
      const owedFull = isOwedFull(p, s);
      const fire = nextFire(s, now, this.dueTimesOf(s), { lastRunOpen, owedFull, missedAsOf });
      if (fire?.trigger === 'catch-up') this.catchUpSince.set(name, missedAsOf);
      else this.catchUpSince.delete(name);
      if (fire === null) {
        if (owedFull && nextFire(s, now, this.dueTimesOf(s), { lastRunOpen }) !== null) {
          this.warn(name, 'schedule holds its fires: its oldest kept run is not submitted yet', {
            runId: runIdsOf(s)[0],
          });
        }
        return n;
      }
      const outcome = await writeFire(this.ctx, name, entry.seq, fire);
      if (outcome !== 'written') {
        this.stats.lostRaces++;
        this.log.debug('schedule fire dropped', { schedule: name, dueAt: fire.dueAt, outcome });
        return n;
      }
      n++;
      this.stats.fired++;
      this.log.info('schedule fired', { schedule: name, ...fire });
      if (fire.skipped === undefined) this.queue.offer({ schedule: name, runId: fire.runId });
    }
    return n;
  }

  /** One queued submit: the run's schedule as the log holds it now, deleted or not. */
  private async submitJob({ schedule, runId }: SubmitJob): Promise<void> {
    const p = this.ctx.loop.projection;
    const entry = p.schedules.get(schedule);
    if (!entry || !owedRuns(p, entry.snapshot.context).includes(runId)) return;
    const outcome = await this.submitter!.attempt(entry.snapshot.context, runId);
    if (outcome.kind !== 'refused') return;
    this.stats.refused++;
    const meta = { schedule, runId, code: outcome.code, reason: outcome.message };
    if (entry.snapshot.value === 'Deleted') {
      this.givenUp.add(runId);
      this.log.error('scheduled run refused for good (schedule deleted)', meta);
      return;
    }
    this.log.error('scheduled run refused for good', meta);
    try {
      await this.ctx.writer.write({
        subject: this.ctx.names.subjects.schedule(schedule),
        type: 'ScheduleRunRefused',
        data: { runId, code: outcome.code, message: outcome.message },
        id: `refused.${runId}`,
      });
    } catch (err: unknown) {
      // Deleted meanwhile, or recorded by another leader: nothing more to do.
      if (isSonarError(err, ErrorCode.IllegalTransition)) return;
      this.warn(schedule, 'run refusal not recorded', { err });
    }
  }

  /** Logs a schedule's failure, at most once per {@link WARN_EVERY_MS} per schedule. */
  private warn(schedule: string, msg: string, meta: Record<string, unknown>): void {
    const now = this.ctx.now();
    if (now - (this.warnedAt.get(schedule) ?? -Infinity) < WARN_EVERY_MS) return;
    this.warnedAt.set(schedule, now);
    this.log.warn(msg, { schedule, ...meta });
  }

  /** Parsed once per schedule: a spec never changes after `ScheduleCreated`. */
  private dueTimesOf(s: ScheduleContext): DueTimes {
    const known = this.dueTimes.get(s.name);
    if (known && known.spec.createdAt === s.createdAt) return known.due;
    const due = dueTimesOf(s);
    this.dueTimes.set(s.name, { spec: s, due });
    return due;
  }
}

/** The component factory `defaultParts` registers. */
export const scheduleFirer =
  (opts: ScheduleFirerOptions = {}) =>
  (ctx: BackendContext): Component =>
    new ScheduleFirer(ctx, opts);
