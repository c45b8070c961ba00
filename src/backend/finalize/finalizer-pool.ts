import type { JsMsg } from '@nats-io/jetstream';
import type { FinalizeJob } from '../../../streams/queues.js';
import { parseDuration } from '../../duration.js';
import type { Logger } from '../../log.js';
import { signalMetric } from '../../metrics.js';
import type { OutputStore } from '../../storage/output-store.js';
import { isSinkRejected, isSinkUnavailable } from '../../storage/results-sink.js';
import type { ResultsSink } from '../../storage/results-sink.js';
import type { Component } from '../backend.js';
import type { BackendContext } from '../context.js';
import {
  FINALIZE_BACKOFF_BASE_MS,
  FINALIZE_BACKOFF_CAP_MS,
  finalizeDelayMs,
} from './finalize-backoff.js';
import { FailureLog } from './failure-log.js';
import { SpanKind, trace } from '@opentelemetry/api';
import { failSpan, inSpan, tracingInUse } from '../../tracing/tracer.js';
import { TRACEPARENT, contextFromTraceparent } from '../../tracing/traceparent.js';
import {
  currentFinalizing,
  isPermanentFinalizeError,
  parseJobs,
  runFinalizeJob,
} from './finalize-job.js';
import type { QueuedJob } from './finalize-job.js';
import {
  batchIdOf,
  enqueueFinalization,
  finalizeMsgId,
  plainJob,
} from '../../../streams/queues.js';
import { reportStage } from '../task-stage-timing.js';
import type { JobDeps, JobOutcome } from './finalize-job.js';
import { MaxDeliveriesWatcher } from './max-deliveries-watcher.js';
import { Poisoner } from './poisoner.js';
import { SerialPuller } from './serial-puller.js';
import { SinkBreaker } from './sink-breaker.js';
import { StragglerGuard } from '../straggler-guard.js';
import { ValidationError } from '../../../actors/errors.js';

/** User input; every field optional (STYLE C3). Durations are ms or strings like `30s`. */
export interface FinalizerPoolOptions {
  /**
   * Where finalized results go.
   * @defaultValue the backend's configured sink: PostgreSQL with `SONAR_RESULTS_URL`, else
   * the `sonar_results` KV bucket
   */
  sink?: ResultsSink;
  /**
   * Consumers bound to the durable `finalizer`, each holding one job at a time.
   * @defaultValue `SONAR_FINALIZERS` (4)
   */
  size?: number;
  /**
   * Delay after a job's first failed delivery; it doubles with each delivery.
   * @defaultValue 1s
   */
  backoffBase?: number | string;
  /**
   * The longest delay between two deliveries of a failing job.
   * @defaultValue 60s
   */
  backoffCap?: number | string;
  /**
   * How often a job in hand renews its lease with an in-progress ack.
   * @defaultValue a third of the consumer's ack_wait (`SONAR_FINALIZE_LEASE` / 3)
   */
  renewInterval?: number | string;
  /**
   * How long each object read and each sink write of a job may take before the delivery
   * fails (and is retried, then poisoned once its deliveries run out).
   * @defaultValue four times the consumer's ack_wait (`SONAR_FINALIZE_LEASE`): 2 min
   */
  ioTimeout?: number | string;
  /**
   * How long one pull waits for a job before asking again (at least 1s).
   * @defaultValue 5s
   */
  pullExpires?: number | string;
  /**
   * Where outputs are read from.
   * @defaultValue the backend's output store
   */
  outputs?: OutputStore;
  /**
   * Handle captured MAX_DELIVERIES advisories (jobs that ran out of deliveries while their
   * backend was gone). Turn off only to test one side alone.
   * @defaultValue true
   */
  watchAdvisories?: boolean;
}

/**
 * The default deadline of one object read or sink write, in leases. The lease bounds how long
 * a dead backend holds a job; this bounds a live one stuck in a store or sink that never
 * answers. It leaves a slow but working write (renewing its lease) several leases, and room
 * to read the largest output from a slow store (docs/benchmarks.md).
 */
export const IO_TIMEOUT_LEASES = 4;

/** The internal form: all required, durations in ms. */
export interface ResolvedFinalizerPoolOptions {
  size: number;
  backoffBaseMs: number;
  backoffCapMs: number;
  /** null: a third of the lease, known once the consumer is read. */
  renewIntervalMs: number | null;
  /** null: {@link IO_TIMEOUT_LEASES} leases. */
  ioTimeoutMs: number | null;
  pullExpiresMs: number;
  watchAdvisories: boolean;
}

export function resolveFinalizerPoolOptions(
  opts: FinalizerPoolOptions,
  defaults: { size: number },
): ResolvedFinalizerPoolOptions {
  const ms = (v: number | string | undefined, fallback: number): number =>
    v === undefined ? fallback : parseDuration(v);
  const size = opts.size ?? defaults.size;
  if (!Number.isInteger(size) || size < 1) {
    throw new ValidationError(
      `finalizer pool 'size' must be a whole number of at least 1, got ${size}`,
    );
  }
  return {
    size,
    backoffBaseMs: ms(opts.backoffBase, FINALIZE_BACKOFF_BASE_MS),
    backoffCapMs: ms(opts.backoffCap, FINALIZE_BACKOFF_CAP_MS),
    renewIntervalMs: opts.renewInterval === undefined ? null : parseDuration(opts.renewInterval),
    ioTimeoutMs: opts.ioTimeout === undefined ? null : parseDuration(opts.ioTimeout),
    pullExpiresMs: Math.max(1_000, ms(opts.pullExpires, 5_000)),
    watchAdvisories: opts.watchAdvisories ?? true,
  };
}

/** Counters since start, for logs, tests and the bench. */
export interface FinalizerStats {
  finalized: number;
  stale: number;
  failed: number;
  poisoned: number;
  /** Times the pool paused because its results sink could not be reached. */
  pauses: number;
}

/** What running one job came to: done (finalized or stale), halted by a stop, or failed. */
type Ran = 'done' | 'halted' | { err: unknown };

interface Failed {
  job: QueuedJob;
  err: unknown;
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * The finalizer pool of one backend (DESIGN.md section 7): `size` lanes on the durable
 * `finalizer`, each holding exactly one job, so pool x backends bounds how many outputs are
 * read and results written at once, cluster-wide. A job's lease (ack_wait) is renewed while
 * it runs. A failure is recorded in `sonar_finalize_errors` and retried with `nak(delay)`
 * (1 s doubling, capped at 60 s); after max_deliver, or at once for a missing or invalid
 * output, the job is poisoned and leaves the queue. Jobs waiting out a delay hold no lane.
 * A sink that cannot be reached is no failure of the job: the pool pauses instead
 * (sink-breaker.ts), holding its jobs until the sink answers, and a record the sink refuses
 * is poisoned at once.
 */
export class FinalizerPool implements Component {
  readonly name = 'finalizer';
  readonly stats: FinalizerStats = { finalized: 0, stale: 0, failed: 0, poisoned: 0, pauses: 0 };
  private readonly opts: ResolvedFinalizerPoolOptions;
  private readonly log: Logger;
  private lanes: SerialPuller[] = [];
  private watcher: MaxDeliveriesWatcher | null = null;
  private deps!: JobDeps;
  private failures!: FailureLog;
  private poisoner!: Poisoner;
  private breaker!: SinkBreaker;
  private halt = new AbortController();
  private renewMs = 10_000;
  private maxDeliver = -1;
  private readonly stopping = new StragglerGuard('finalizer');
  /** Whether jobs get spans of their own (tracingInUse), settled at start. */
  private tracing = true;

  constructor(
    private readonly ctx: BackendContext,
    private readonly userOpts: FinalizerPoolOptions = {},
  ) {
    this.opts = resolveFinalizerPoolOptions(userOpts, { size: ctx.config.finalizers });
    this.log = ctx.log.child({ component: 'finalizer' });
  }

  /** @throws StillStoppingError while a job of the last run is still in hand. */
  async start(): Promise<void> {
    // A lane left in a slow sink write by a bounded stop still holds (and renews) its job.
    this.stopping.assertIdle();
    this.tracing = tracingInUse();
    const { ctx, opts } = this;
    const sink = this.userOpts.sink ?? ctx.results;
    this.halt = new AbortController();
    this.breaker = new SinkBreaker(sink.probe?.bind(sink), this.log, this.halt.signal, (paused) =>
      signalMetric({ kind: 'sink-pause', nodeId: ctx.nodeId, paused }),
    );
    this.failures = await FailureLog.open(ctx.nc, ctx.names);
    const consumer = await ctx.js.consumers.get(
      ctx.names.streams.finalize,
      ctx.names.consumers.finalizer,
    );
    // The server's settings are the truth: another backend may have provisioned them.
    const { config } = await consumer.info(true);
    const leaseMs = (config.ack_wait ?? 30e9) / 1e6;
    this.deps = {
      names: ctx.names,
      store: ctx.store,
      loop: ctx.loop,
      writer: ctx.writer,
      outputs: this.userOpts.outputs ?? ctx.outputs,
      sink,
      now: ctx.now,
      maxOutputBytes: ctx.config.maxOutputBytes,
      ioTimeoutMs: opts.ioTimeoutMs ?? IO_TIMEOUT_LEASES * leaseMs,
    };
    this.poisoner = new Poisoner({
      ...this.deps,
      js: ctx.js,
      failures: this.failures,
      log: this.log,
      nodeId: ctx.nodeId,
    });
    this.maxDeliver = config.max_deliver ?? -1;
    this.renewMs = opts.renewIntervalMs ?? Math.max(100, Math.floor(leaseMs / 3));
    if (this.renewMs >= leaseMs) {
      this.log.warn('lease renewal is not shorter than the lease', {
        renewMs: this.renewMs,
        leaseMs,
      });
    }
    // One puller for all the lanes: it asks for a job for every free lane in one pull.
    const lanes = new SerialPuller(
      consumer,
      (m) => this.handle(m),
      this.log,
      opts.pullExpiresMs,
      opts.size,
      // While the sink is down, no job is pulled: it would only wait beside the held ones.
      () => this.breaker.whenClosed(),
    );
    this.lanes.push(lanes);
    lanes.start();
    if (opts.watchAdvisories) {
      this.watcher = new MaxDeliveriesWatcher({
        jsm: ctx.jsm,
        names: ctx.names,
        failures: this.failures,
        poisoner: this.poisoner,
        log: this.log,
      });
      await this.watcher.start();
    }
    this.log.info('finalizer pool started', {
      size: opts.size,
      leaseMs,
      ioTimeoutMs: this.deps.ioTimeoutMs,
      maxDeliver: this.maxDeliver,
    });
  }

  /** Stops pulling; jobs in hand finish (the backend bounds this; others return after the lease). */
  async stop(): Promise<void> {
    const lanes = this.lanes;
    this.lanes = [];
    // Held jobs stop waiting for the sink: they are handed back below.
    this.halt.abort();
    await this.stopping.track(Promise.all([...lanes.map((l) => l.stop()), this.watcher?.stop()]));
  }

  /**
   * One message: a single job, or a batch whose jobs run one by one in this lane. A batch is
   * run as a batch once: what its first delivery leaves unfinished (failed, or not run
   * because the pool stopped or the backend died) is split into single jobs on its next
   * delivery (see split), so every job keeps the deliveries, backoff and poison of its own.
   */
  private async handle(msg: JsMsg): Promise<void> {
    const queued = parseJobs(msg.data);
    if (!queued) {
      await this.dropUnreadable(msg);
      return;
    }
    if (queued.batch && msg.info.deliveryCount > 1) {
      await this.split(msg, queued.jobs);
      return;
    }
    // The lease must outlive a slow output store or sink: renew well before ack_wait ends.
    const renew = setInterval(() => {
      try {
        msg.working();
        signalMetric({ kind: 'lease-renewal', nodeId: this.ctx.nodeId });
      } catch (_err: unknown) {
        // Connection gone: the job comes back to a live finalizer after its lease.
      }
    }, this.renewMs);
    try {
      const failed: Failed[] = [];
      let halted = false;
      for (const job of queued.jobs) {
        const ran = await this.traced(msg, job);
        if (ran === 'halted') {
          halted = true;
          break;
        }
        if (ran !== 'done') failed.push({ job, err: ran.err });
      }
      const left = await this.onFailures(msg, failed);
      // Stopped while the sink was down: hand the message back now rather than after its lease.
      if (halted) settle(msg, 'nak', this.log);
      // Acked only once every failed job is poisoned: a crash before leaves them to come back.
      else if (left === 0) settle(msg, 'ack', this.log);
      else settle(msg, 'nak', this.log, this.delayMs(msg));
    } finally {
      clearInterval(renew);
    }
  }

  /**
   * A batch delivered again: each of its jobs still Finalizing with its attempt and round goes
   * back to the queue alone, then the batch is acked. Its msg id names the batch
   * (`fin.<runId>.<taskId>.<attemptId>.<round>.split-<batchId>`), so a split repeated after a
   * crash is stored once. Its first delivery is the job's own first retry.
   */
  private async split(msg: JsMsg, jobs: QueuedJob[]): Promise<void> {
    const { ctx } = this;
    const batchId = batchIdOf(msg.subject);
    try {
      let alone = 0;
      for (const job of jobs) {
        if (!(await currentFinalizing(this.deps, job))) continue; // finished, or stale
        const round = job.round ?? 0;
        const msgId = `${finalizeMsgId(job, round)}.split-${batchId}`;
        await enqueueFinalization(ctx.js, ctx.names, plainJob(job), round, msgId, job.traceparent);
        alone++;
      }
      this.log.debug('finalize batch split', { subject: msg.subject, jobs: alone });
      settle(msg, 'ack', this.log);
    } catch (err: unknown) {
      this.log.warn('finalize batch not split', { subject: msg.subject, err });
      settle(msg, 'nak', this.log, this.delayMs(msg));
    }
  }

  private delayMs(msg: JsMsg): number {
    const { backoffBaseMs, backoffCapMs } = this.opts;
    return finalizeDelayMs(msg.info.deliveryCount, backoffBaseMs, backoffCapMs);
  }

  /**
   * Runs one job in a span of its own, the child of the `result` request's: named by the
   * job's entry in a batch, by the message's header for a single job, or else by the run.
   */
  private async traced(msg: JsMsg, job: QueuedJob): Promise<Ran> {
    // Not in use: the span would be a no-op one, active in a context nobody can read.
    if (!this.tracing) return this.runOne(job);
    const traceparent =
      job.traceparent ||
      msg.headers?.get(TRACEPARENT) ||
      this.ctx.loop.projection.runs.get(job.runId)?.snapshot.context.traceparent;
    if (!traceparent) return this.runOne(job);
    return inSpan(
      'finalize',
      {
        kind: SpanKind.CONSUMER,
        parent: contextFromTraceparent(traceparent),
        attributes: {
          'sonar.run_id': job.runId,
          'sonar.task_id': job.taskId,
          'sonar.attempt_id': job.attemptId,
          'sonar.delivery': msg.info.deliveryCount,
        },
      },
      () => this.runOne(job),
    );
  }

  private async runOne(job: QueuedJob): Promise<Ran> {
    try {
      const outcome = await this.runHeld(job);
      if (outcome === null) return 'halted';
      if (outcome.kind === 'finalized') {
        this.stats.finalized++;
        // Succeeded keeps no time of its own: the move is now, by this backend's clock.
        const { task, written } = outcome.moved;
        reportStage(this.ctx.nodeId, 'finalize', task, written, this.ctx.now());
      } else {
        this.stats.stale++;
        this.log.debug('stale finalize job dropped', { ...fields(job), reason: outcome.reason });
      }
      return 'done';
    } catch (err: unknown) {
      const span = trace.getActiveSpan();
      if (span) failSpan(span, err);
      return { err };
    }
  }

  /**
   * Runs the job; while the sink cannot be reached, holds it (its lease renewed) and runs it
   * again once the breaker closes, so an outage spends none of its deliveries. Null: the
   * pool stopped meanwhile.
   */
  private async runHeld(job: QueuedJob): Promise<JobOutcome | null> {
    for (;;) {
      await this.breaker.whenClosed();
      if (this.halt.signal.aborted) return null;
      try {
        return await runFinalizeJob(this.deps, job);
      } catch (err: unknown) {
        if (!isSinkUnavailable(err)) throw err;
        if (!this.breaker.isOpen) this.stats.pauses++;
        void this.breaker.trip(err);
      }
    }
  }

  /**
   * Records each failure, and poisons a job whose error is permanent, or every one on the
   * message's last delivery. Returns how many are left to retry.
   */
  private async onFailures(msg: JsMsg, failed: Failed[]): Promise<number> {
    const delivery = msg.info.deliveryCount;
    const outOfDeliveries = this.maxDeliver > 0 && delivery >= this.maxDeliver;
    let left = 0;
    for (const { job, err } of failed) {
      this.stats.failed++;
      // A record the sink refuses (a constraint or data error) fails again on every retry.
      const permanent = isPermanentFinalizeError(err) || isSinkRejected(err);
      const error = errorText(err);
      await this.record(job, { error, delivery, permanent });
      if ((permanent || outOfDeliveries) && (await this.poison(job, error, delivery))) continue;
      left++;
      this.log.warn('finalize failed', {
        ...fields(job),
        delivery,
        delayMs: this.delayMs(msg),
        error,
      });
    }
    return left;
  }

  private async record(
    job: FinalizeJob,
    f: { error: string; delivery: number; permanent: boolean },
  ): Promise<void> {
    const task = this.ctx.loop.projection.tasks.get(`${job.runId}.${job.taskId}`);
    try {
      await this.failures.record(job, {
        ...f,
        at: new Date(this.ctx.now()).toISOString(),
        round: task?.snapshot.context.finalizeRound ?? 0,
        by: this.ctx.nodeId,
      });
    } catch (recordErr: unknown) {
      this.log.warn('finalize error not recorded', { ...fields(job), err: recordErr });
    }
  }

  /** Whether the job left the queue's care (poisoned, or found stale). */
  private async poison(job: QueuedJob, error: string, deliveries: number): Promise<boolean> {
    try {
      const outcome = await this.poisoner.poison(job, { error, deliveries });
      if (outcome === 'poisoned') this.stats.poisoned++;
      return true;
    } catch (poisonErr: unknown) {
      // On the last delivery the nak that follows ends in a MAX_DELIVERIES advisory: the
      // watcher poisons the job then.
      this.log.error('poison failed', { ...fields(job), err: poisonErr });
      return false;
    }
  }

  private async dropUnreadable(msg: JsMsg): Promise<void> {
    this.log.error('unreadable finalize job poisoned', { subject: msg.subject });
    try {
      await this.poisoner.poisonUnreadable(msg.subject, msg.data);
      settle(msg, 'ack', this.log);
    } catch (err: unknown) {
      this.log.warn('unreadable finalize job not moved', { subject: msg.subject, err });
      const { backoffBaseMs, backoffCapMs } = this.opts;
      settle(
        msg,
        'nak',
        this.log,
        finalizeDelayMs(msg.info.deliveryCount, backoffBaseMs, backoffCapMs),
      );
    }
  }
}

/**
 * Acks or naks; on a closed connection this throws, and then there is nothing to do: the
 * server redelivers the job after its lease.
 */
function settle(msg: JsMsg, how: 'ack' | 'nak', log: Logger, delayMs?: number): void {
  try {
    if (how === 'ack') msg.ack();
    else msg.nak(delayMs);
  } catch (err: unknown) {
    log.warn(`finalize job ${how} failed`, { subject: msg.subject, err });
  }
}

const fields = (job: FinalizeJob) => ({
  runId: job.runId,
  taskId: job.taskId,
  attemptId: job.attemptId,
});

/** The pool as a backend part: `components: [finalizerPool({ sink })]`. */
export const finalizerPool =
  (opts: FinalizerPoolOptions = {}) =>
  (ctx: BackendContext): FinalizerPool =>
    new FinalizerPool(ctx, opts);
