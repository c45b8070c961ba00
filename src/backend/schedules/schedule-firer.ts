import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { dueTimesOf } from '../../schedules/due-times.js';
import type { DueTimes } from '../../schedules/due-times.js';
import { isRunOpen, nextFire } from '../../schedules/next-fire.js';
import type { ScheduleContext } from '../../../actors/schedule/schedule.machine.js';
import type { Logger } from '../../log.js';
import type { Component } from '../backend.js';
import type { BackendContext } from '../context.js';
import { RECONCILER_LOCK } from '../reconciler/index.js';
import { StragglerGuard } from '../straggler-guard.js';
import { writeFire } from './fire-writer.js';
import { RunSubmitter } from './run-submitter.js';

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
 * Fires schedules (docs/schedules.md) as a backend component. Every backend runs one; only
 * the holder of the reconciler's lock fires, read from `sonar_locks` at each check.
 *
 * Exactly once per due time rests on the log, not on the lock: each fire is a `ScheduleFired`
 * appended with the schedule's last sequence as the expectation (fire-writer.ts), and the
 * schedule machine refuses a due time at or before its cursor. Two backends that both think
 * they lead for a moment cannot both fire a due time, and a new leader starts from the cursor
 * the log holds, so a failover neither fires a due time twice nor skips one (unless the fleet
 * had no leader for longer than the schedule's `missedAfter`: then catch-up decides).
 */
export class ScheduleFirer implements Component {
  readonly name = 'schedules';
  private readonly log: Logger;
  private readonly checkMs: number;
  private readonly stopping = new StragglerGuard('schedules');
  private readonly dueTimes = new Map<string, { spec: ScheduleContext; due: DueTimes }>();
  private locks: KV | null = null;
  private submitter: RunSubmitter | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Fires this backend appended (tests, status). */
  readonly stats = { fired: 0, lostRaces: 0 };

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
    this.timer = setInterval(() => this.check(), this.checkMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.stopping.track(this.running ?? Promise.resolve());
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
    for (const [name, entry] of p.schedules) {
      if (this.stopped) return;
      if (entry.snapshot.status === 'done') continue;
      await this.submitter!.finishOpen(p, entry.snapshot.context);
      if (entry.snapshot.value === 'Active') await this.fireDue(name);
    }
  }

  /** Fires what is due of one schedule, one `ScheduleFired` at a time. */
  private async fireDue(name: string): Promise<void> {
    const p = this.ctx.loop.projection;
    for (let n = 0; n < MAX_FIRES_PER_CHECK && !this.stopped; n++) {
      const entry = p.schedules.get(name);
      if (!entry || entry.snapshot.value !== 'Active') return;
      const s = entry.snapshot.context;
      const lastOpen = s.lastRun !== null && isRunOpen(p, s.lastRun.runId);
      const fire = nextFire(s, this.ctx.now(), this.dueTimesOf(s), lastOpen);
      if (fire === null) return;
      const outcome = await writeFire(this.ctx, name, entry.seq, fire);
      if (outcome !== 'written') {
        this.stats.lostRaces++;
        this.log.debug('schedule fire dropped', { schedule: name, dueAt: fire.dueAt, outcome });
        return;
      }
      this.stats.fired++;
      this.log.info('schedule fired', { schedule: name, ...fire });
      if (fire.skipped === undefined) await this.submitter!.submit(s, fire.runId);
    }
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
