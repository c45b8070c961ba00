import { Kvm } from '@nats-io/kv';
import { PLANNER_HONORS } from '../../../actors/reconciler/honors.js';
import type { Decisions } from '../../../actors/reconciler/decisions.js';
import { formatTagRates, nextRatePassAt } from '../../../actors/reconciler/tag-rates.js';
import type { LiveWorker } from '../../../actors/reconciler/fleet.js';
import type { Logger } from '../../log.js';
import { signalMetric } from '../../metrics.js';
import type { Component } from '../backend.js';
import { workersInService } from './registry.js';
import type { BackendContext } from '../context.js';
import { DecisionWriter } from '../projection/index.js';
import { dispatchTask } from './dispatch.js';
import { LeaderLock } from './leader-lock.js';
import { ReconcilePass } from './reconcile-pass.js';
import { ServerClock } from './server-clock.js';
import { StragglerGuard } from '../straggler-guard.js';
import type { Dispatch, PassSummary } from './reconcile-pass.js';

export interface ReconcilerLoopOptions {
  /**
   * Publishes one placement.
   * @defaultValue `dispatchTask` (src/backend/reconciler/dispatch.ts)
   */
  dispatch?: Dispatch;
  /**
   * How long after an event that may allow placement (a task became Pending, capacity freed,
   * a run was submitted) a prompt pass runs, so that bursts of events share one pass.
   * @defaultValue 2
   */
  debounceMs?: number;
  /**
   * The time between the end of one pass and the start of a prompt one, after a pass that
   * placed or settled a batch (`SONAR_DISPATCH_BATCH`) or more: a stream of events then never
   * keeps the planner busy back to back. After a smaller pass (light load) the gap is only as
   * long as that pass took, up to this: a fixed long gap delays starts at light load, and a
   * fixed short one burns CPU at saturation (bench/e2e.ts measures both).
   * @defaultValue 20
   */
  minGapMs?: number;
  /**
   * Writes in flight at once while carrying out a pass.
   * @defaultValue 64
   */
  concurrency?: number;
  /**
   * A monotonic clock (lease, age floor, registry cache age).
   * @defaultValue `performance.now`
   */
  monotonic?: () => number;
}

/**
 * A pass still running after this long, while the server answers, is stuck: `/healthz`
 * fails so that the process is restarted and another backend leads.
 */
const STUCK_PASS_MS = 120_000;

/** Events that neither add placeable work nor free capacity nor settle anything. */
const QUIET_EVENTS = new Set([
  'TaskPublished',
  'TaskStarted',
  'StepStarved',
  'StepServed',
  'RunExpired',
]);

/**
 * The reconciler (DESIGN.md sections 4, 5 and 7) as a backend component. Every backend runs
 * one; only the holder of the `reconciler` lock acts.
 *
 * - Every tick (`SONAR_TICK`) it renews or tries to take the lock; on winning it appends
 *   `ReconcilerElected` and restarts the age floor. Renewal runs on its own timer, so a long
 *   pass never delays it.
 * - Every tick the leader reads the whole registry (on 2.9 a KV watcher does not see a key
 *   expire) and runs a full pass (ReconcilePass).
 * - Between ticks, an applied event that may allow placement schedules a prompt pass after a
 *   few ms (with the registry read at the last tick), so a task submitted to an idle fleet is
 *   published within tens of milliseconds, not at the next tick.
 * - Passes never overlap. Ages are measured on the server's time line: the loop's clock is
 *   the backend's `now` corrected by the offset sampled from the lock's own KV writes.
 */
export class ReconcilerLoop implements Component {
  readonly name = 'reconciler';
  private readonly log: Logger;
  private readonly debounceMs: number;
  private readonly minGapMs: number;
  private readonly monotonic: () => number;
  private readonly writer: DecisionWriter;
  private lock: LeaderLock | null = null;
  private pass: ReconcilePass | null = null;
  private readonly serverClock = new ServerClock();
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private promptTimer: NodeJS.Timeout | null = null;
  /** A prompt pass for when a rate-limited tag's next token comes back, before the tick. */
  private tokenTimer: NodeJS.Timeout | null = null;
  private unsubscribe: (() => void) | null = null;
  private renewing: Promise<void> | null = null;
  private running: Promise<void> | null = null;
  private wantTick = false;
  private wantPrompt = false;
  private lastPassEndedAt = -Infinity;
  private lastPassMs = 0;
  private lastPassBusy = false;
  /** When the pass now running started (monotonic); null between passes. */
  private passStartedAt: number | null = null;
  private unregisterLiveness: (() => void) | null = null;
  /** Leadership terms won by this process; the age floor restarts with each. */
  private term = 0;
  private watching: { term: number; since: number } | null = null;
  private registry: { entries: LiveWorker[]; readAt: number } | null = null;
  /** The last full pass's outcome (tests, status). */
  lastSummary: PassSummary | null = null;
  private readonly stopping = new StragglerGuard('reconciler');

  constructor(
    private readonly ctx: BackendContext,
    private readonly opts: ReconcilerLoopOptions = {},
  ) {
    this.log = ctx.log.child({ component: 'reconciler' });
    this.debounceMs = opts.debounceMs ?? 2;
    this.minGapMs = opts.minGapMs ?? 20;
    this.monotonic = opts.monotonic ?? (() => performance.now());
    this.writer = new DecisionWriter(ctx.store, ctx.loop, ctx.names);
  }

  /** Whether this process leads and may act now. */
  isLeader(): boolean {
    return this.lock?.isLeader() ?? false;
  }

  /** @throws StillStoppingError while a pass of the last run is still going. */
  async start(): Promise<void> {
    // A pass left running by a bounded stop would otherwise run beside a new loop's passes.
    this.stopping.assertIdle();
    this.stopped = false;
    const { ctx } = this;
    const kv = await new Kvm(ctx.nc).open(ctx.names.buckets.locks);
    this.lock = new LeaderLock({
      kv,
      nodeId: ctx.nodeId,
      lockTtlMs: ctx.config.lockTtlMs,
      tickMs: ctx.config.tickMs,
      monotonic: this.monotonic,
      wall: ctx.now,
    });
    this.pass = new ReconcilePass(ctx, this.writer, {
      isLeader: () => this.isLeader(),
      now: () => this.now(),
      dispatch: this.opts.dispatch ?? dispatchTask,
      concurrency: this.opts.concurrency ?? 64,
      log: this.log,
    });
    this.unsubscribe = ctx.loop.onApplied(({ ref, event }) => {
      if (ref.kind === 'worker' || ref.kind === 'system' || QUIET_EVENTS.has(event.type)) return;
      this.schedulePrompt();
    });
    this.unregisterLiveness = ctx.liveness.register('reconciler', () => this.stuckPass());
    this.timer = setInterval(() => this.onTick(), ctx.config.tickMs);
    this.onTick();
  }

  /** A pass running for longer than it ever should while the server answers, or null. */
  private stuckPass(): string | null {
    if (this.passStartedAt === null || !this.ctx.contact.inContact) return null;
    // Time out of contact is the outage's, not the pass's.
    const ms = Math.min(this.monotonic() - this.passStartedAt, this.ctx.contact.steadyForMs());
    return ms > STUCK_PASS_MS ? `a reconcile pass has been running for ${Math.round(ms)} ms` : null;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.promptTimer) clearTimeout(this.promptTimer);
    if (this.tokenTimer) clearTimeout(this.tokenTimer);
    this.timer = null;
    this.promptTimer = null;
    this.tokenTimer = null;
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.unregisterLiveness?.();
    this.unregisterLiveness = null;
    await this.stopping.track(
      (async () => {
        await this.renewing;
        await this.running;
        await this.lock?.release();
      })(),
    );
  }

  /** The clock on the server's time line. */
  now(): number {
    return this.ctx.now() + this.serverClock.offsetMs();
  }

  private onTick(): void {
    if (this.stopped || this.renewing) return;
    this.renewing = this.renew()
      .then(() => this.request('tick'))
      .catch((err: unknown) => this.log.error('reconciler lock renewal failed', { err }))
      .finally(() => {
        this.renewing = null;
      });
  }

  private async renew(): Promise<void> {
    const turn = await this.lock!.acquireOrRenew();
    // A new term starts its clock afresh: it may have moved while this process followed.
    if (turn.elected) this.serverClock.reset();
    if (turn.clock !== null) this.serverClock.add(turn.clock);
    if (!turn.elected) return;
    this.term++;
    this.registry = null;
    this.pass!.auditDispatch();
    const rates = formatTagRates(this.ctx.config.tagRates ?? {});
    this.log.info('reconciler elected', {
      lockTtlMs: this.ctx.config.lockTtlMs,
      ...(rates !== '' && { tagRates: rates }),
    });
    try {
      await this.ctx.writer.write({
        subject: this.ctx.names.subjects.system('reconciler'),
        type: 'ReconcilerElected',
        data: {
          nodeId: this.ctx.nodeId,
          honors: [...PLANNER_HONORS],
          // What this leader limits, so that the log says which rates its placements kept.
          ...(rates !== '' && { tagRates: rates }),
        },
      });
    } catch (err: unknown) {
      // The lock is what makes a leader; the event only records it.
      this.log.warn('ReconcilerElected not appended', { err });
    }
  }

  private schedulePrompt(): void {
    if (this.stopped || this.promptTimer || !this.isLeader()) return;
    this.promptTimer = setTimeout(() => {
      this.promptTimer = null;
      this.request('prompt');
    }, this.debounceMs);
  }

  private request(kind: 'tick' | 'prompt'): void {
    if (kind === 'tick') this.wantTick = true;
    else this.wantPrompt = true;
    if (this.running || this.stopped) return;
    this.running = this.drain().finally(() => {
      this.running = null;
    });
  }

  /** Runs requested passes one at a time; a tick covers a pending prompt pass too. */
  private async drain(): Promise<void> {
    while (!this.stopped && (this.wantTick || this.wantPrompt)) {
      if (!this.wantTick) {
        // Keep prompt passes apart, so a stream of events never keeps the planner busy.
        // A pass that placed or settled a batch means load: keep the full gap. A cheap pass
        // (light load) is followed as soon as it took itself.
        const gap = this.lastPassBusy ? this.minGapMs : Math.min(this.minGapMs, this.lastPassMs);
        const wait = this.lastPassEndedAt + gap - this.monotonic();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
      const full = this.wantTick;
      this.wantTick = false;
      this.wantPrompt = false;
      const started = this.monotonic();
      this.passStartedAt = started;
      let summary: PassSummary | null = null;
      try {
        summary = await this.runPass(full);
      } catch (err: unknown) {
        this.log.error('reconcile pass failed', { err });
      }
      this.passStartedAt = null;
      this.lastPassEndedAt = this.monotonic();
      this.lastPassMs = this.lastPassEndedAt - started;
      this.lastPassBusy =
        summary !== null &&
        summary.published + summary.requeued + summary.dead + summary.progressed >=
          this.ctx.config.dispatchBatch;
      if (summary?.decisions?.rateLimited) this.wakeForTokens(summary.decisions);
    }
  }

  /**
   * A rate-limited tag whose bucket this pass emptied gets its next token back at a known
   * time; a pass then places what waits for it, instead of the next tick (which may be later
   * than the window: the rate would not be reached). Nothing is scheduled for a tag with
   * tokens left, or past the next tick.
   */
  private wakeForTokens(decisions: Decisions): void {
    const rates = this.ctx.config.tagRates;
    if (!rates || this.tokenTimer || this.stopped) return;
    const p = this.ctx.loop.projection;
    const now = this.now();
    // The pass's own publishes may not be folded yet: count those as made now.
    const unfolded = new Map<string, number>();
    const placed = new Map<string, number>();
    for (const { task, tag } of decisions.publish) {
      placed.set(tag, (placed.get(tag) ?? 0) + 1);
      if (p.tasks.get(task)?.snapshot.value !== 'Pending') continue;
      unfolded.set(tag, (unfolded.get(tag) ?? 0) + 1);
    }
    const wake = nextRatePassAt(
      Object.entries(rates).map(([tag, rate]) => {
        const folded = p.publishTimes.get(tag) ?? [];
        const extra = unfolded.get(tag) ?? 0;
        return {
          rate,
          times: extra === 0 ? folded : [...folded, ...new Array<number>(extra).fill(now)],
          leftWhenPlanned: decisions.rateLimited?.[tag]?.left,
          placed: placed.get(tag) ?? 0,
        };
      }),
      now,
    );
    if (wake === null) return;
    const inMs = wake - now;
    if (!(inMs < this.ctx.config.tickMs)) return;
    this.tokenTimer = setTimeout(
      () => {
        this.tokenTimer = null;
        this.request('prompt');
      },
      Math.max(0, inMs) + 1,
    );
  }

  private async runPass(full: boolean): Promise<PassSummary | null> {
    if (!this.isLeader()) return null;
    // A prompt pass reuses the tick's registry read (one KV read per worker is a tick's cost).
    const fresh =
      this.registry !== null && this.monotonic() - this.registry.readAt <= this.ctx.config.tickMs;
    const entries = full || !fresh ? await this.readRegistry() : this.registry!.entries;
    const started = performance.now();
    const summary = await this.pass!.run({
      entries,
      full,
      ageFloorPassed: this.ageFloorPassed(),
      steadyContactMs: this.ctx.contact.steadyForMs(),
    });
    signalMetric({
      kind: 'reconcile-pass',
      nodeId: this.ctx.nodeId,
      ms: performance.now() - started,
      full,
    });
    if (full) this.lastSummary = summary;
    return summary;
  }

  private async readRegistry(): Promise<LiveWorker[]> {
    let entries: LiveWorker[];
    try {
      entries = await this.ctx.registry.live(workersInService(this.ctx.loop.projection));
    } catch (err: unknown) {
      // A registry that cannot be read is an outage to wait out, like a disconnect.
      this.ctx.contact.noteFailure();
      throw err;
    }
    const readAt = this.monotonic();
    this.registry = { entries, readAt };
    if (this.watching?.term !== this.term) this.watching = { term: this.term, since: readAt };
    return entries;
  }

  /**
   * After a (re)start or a new term, no task is judged orphaned and no worker lost until the
   * registry has been watched for one full pulse TTL: every live worker has pulsed by then.
   * The same holds after an outage (a disconnect, JetStream not answering, a registry read
   * that failed): meanwhile no worker could pulse, and their keys expired through no fault
   * of theirs; they put them back within a pulse interval of the server's return.
   */
  private ageFloorPassed(): boolean {
    const w = this.watching;
    const ttl = this.ctx.config.pulseTtlMs;
    return (
      w !== null &&
      w.term === this.term &&
      this.monotonic() - w.since >= ttl &&
      this.ctx.contact.steadyForMs() >= ttl
    );
  }
}

/** The component factory `defaultParts` registers. */
export const reconcilerLoop =
  (opts: ReconcilerLoopOptions = {}) =>
  (ctx: BackendContext): Component =>
    new ReconcilerLoop(ctx, opts);
