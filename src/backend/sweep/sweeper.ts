import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { parseDuration } from '../../duration.js';
import type { Logger } from '../../log.js';
import type { Component } from '../backend.js';
import type { BackendContext } from '../context.js';
import { StragglerGuard } from '../straggler-guard.js';
import { FullSweep } from './full-sweep.js';
import type { SweepReport } from './full-sweep.js';
import type { RetentionSnapshots } from './retention.js';
import { claimSweepTurn } from './sweep-claim.js';

/** User input; every field optional (STYLE C3). */
export interface SweeperOptions {
  /**
   * How often this backend checks whether the fleet's next sweep is due (ms or `30s`).
   * @defaultValue a quarter of `SONAR_FULL_SWEEP`, between 1 s and 60 s
   */
  checkEvery?: number | string;
  /**
   * Where retention keeps the final state of the runs it purges (see FullSweepOptions).
   * @defaultValue the projection snapshot in `sonar_snapshots`
   */
  snapshots?: RetentionSnapshots | null;
}

/**
 * The full sweep as a backend component. Every backend runs one; at most one sweep runs per
 * SONAR_FULL_SWEEP across the fleet: every `checkEvery` each backend reads the `full-sweep`
 * turn in `sonar_schedule` and, once it is due, claims it by compare-and-set; the one whose
 * write lands sweeps. A backend that dies mid-sweep holds nothing: the next turn is due one
 * interval after the claim, whoever takes it.
 */
export class Sweeper implements Component {
  readonly name = 'sweeper';
  /** The last sweep this backend ran (tests, status). */
  lastReport: SweepReport | null = null;
  /** Turns this backend claimed, and checks that found the turn not due or taken. */
  readonly stats = { swept: 0, notDue: 0 };
  private readonly log: Logger;
  private readonly checkMs: number;
  private readonly stopping = new StragglerGuard('sweeper');
  private kv: KV | null = null;
  private sweep: FullSweep | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private abort = new AbortController();

  constructor(
    private readonly ctx: BackendContext,
    private readonly opts: SweeperOptions = {},
  ) {
    this.log = ctx.log.child({ component: 'sweep' });
    const quarter = Math.min(60_000, Math.max(1_000, ctx.config.fullSweepMs / 4));
    this.checkMs = opts.checkEvery === undefined ? quarter : parseDuration(opts.checkEvery);
  }

  /** @throws StillStoppingError while a sweep of the last run is still going. */
  async start(): Promise<void> {
    this.stopping.assertIdle();
    this.abort = new AbortController();
    const { ctx } = this;
    this.kv = await new Kvm(ctx.nc).open(ctx.names.buckets.schedule);
    this.sweep = await FullSweep.open(
      ctx,
      this.opts.snapshots === undefined ? {} : { snapshots: this.opts.snapshots },
    );
    this.timer = setInterval(() => this.check(), this.checkMs);
  }

  /** Stops checking; a sweep under way skips the repairs it has not begun. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.abort.abort();
    await this.stopping.track(this.running ?? Promise.resolve());
  }

  private check(): void {
    if (this.running || this.abort.signal.aborted) return;
    this.running = this.turn()
      .catch((err: unknown) => this.log.error('full sweep failed', { err }))
      .finally(() => {
        this.running = null;
      });
  }

  private async turn(): Promise<void> {
    const claim = await claimSweepTurn(this.kv!, {
      nodeId: this.ctx.nodeId,
      now: this.ctx.now(),
      intervalMs: this.ctx.config.fullSweepMs,
    });
    if (!claim.won) {
      this.stats.notDue++;
      return;
    }
    this.stats.swept++;
    this.lastReport = await this.sweep!.run(this.abort.signal);
  }
}

/** The component factory `defaultParts` registers. */
export const sweeper =
  (opts: SweeperOptions = {}) =>
  (ctx: BackendContext): Component =>
    new Sweeper(ctx, opts);
