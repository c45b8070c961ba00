import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { capacityAfter, capacityView } from '../../actors/reconciler/capacity.js';
import { readFleet } from '../../actors/reconciler/fleet.js';
import type { Projection } from '../../actors/projection.js';
import { onMetricSignal } from '../metrics.js';
import type { BackendContext } from './context.js';
import { eventsStoreRoom } from './storage/index.js';
import { TASK_STATES, tasksByState } from './storage/index.js';
import type { LiveEntry } from './reconciler/index.js';

const WORKER_STATES = ['Active', 'Draining', 'Left', 'Lost'] as const;

/** The same rule as readFleet's (DESIGN.md section 4), for one entry. */
function isEligible(
  e: LiveEntry,
  p: Projection,
  live: ReadonlySet<string>,
  now: number,
  ctx: BackendContext,
): boolean {
  if (!live.has(e.workerId) || !e.active) return false;
  if (p.workers.get(e.workerId)?.snapshot.value === 'Draining') return false;
  return now - Date.parse(e.pulseAt) <= ctx.config.pulseTtlMs;
}

/**
 * One backend's Prometheus metrics, in a registry of its own so that backends
 * sharing a process never collide.
 *
 * - Gauges are read on scrape: tasks by state, poisoned, worker counts and the leader from the
 *   projection; capacity per tag and global from the registry with the reconciler's own
 *   functions; the finalize queue depth from the `SONAR_FINALIZE` stream.
 * - Counters start at 0 with the process, as Prometheus expects, and are fed by events this
 *   backend's projection applies (publishes, requeues by reason, recoveries, failures) and by
 *   metric signals (reconcile pass duration, finalize lease renewals).
 */
export class BackendMetrics {
  readonly registry = new Registry();
  private readonly unsubscribe: (() => void)[] = [];
  private readonly tasks: Gauge<'state'>;
  private readonly poisoned: Gauge;
  private readonly workers: Gauge<'state'>;
  private readonly liveWorkers: Gauge;
  private readonly eligibleWorkers: Gauge;
  private readonly capacityTag: Gauge<'tag'>;
  private readonly capacityGlobal: Gauge;
  private readonly finalizeDepth: Gauge;
  private readonly leader: Gauge;
  private readonly position: Gauge;
  private readonly connected: Gauge;
  private readonly jetstream: Gauge;
  private readonly eventsBytes: Gauge;
  private readonly eventsMaxBytes: Gauge;
  private readonly eventsFull: Gauge;

  constructor(private readonly ctx: BackendContext) {
    const registers = [this.registry];
    const gauge = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      new Gauge<L>({ name, help, labelNames, registers });
    this.tasks = gauge('sonar_tasks', 'Tasks by state (all runs the projection holds)', ['state']);
    this.poisoned = gauge('sonar_tasks_poisoned', 'Tasks held Poisoned, waiting for an operator');
    this.workers = gauge('sonar_workers', 'Workers by state, from the event log', ['state']);
    this.liveWorkers = gauge('sonar_workers_live', 'Workers whose registry key exists');
    this.eligibleWorkers = gauge(
      'sonar_workers_eligible',
      'Live workers that are active with a recent pulse (placement takes them)',
    );
    this.capacityTag = gauge('sonar_capacity', 'Free task capacity per tag', ['tag']);
    this.capacityGlobal = gauge('sonar_capacity_global', 'Free task capacity, all tags');
    this.finalizeDepth = gauge(
      'sonar_finalize_queue_depth',
      'Messages in the SONAR_FINALIZE work queue: a job, or a batch of inline-output jobs',
    );
    this.leader = gauge('sonar_reconciler_leader', '1 when this backend was last elected leader');
    this.position = gauge('sonar_projection_seq', 'Stream sequence the projection has applied');
    this.eventsBytes = gauge('sonar_events_store_bytes', 'Bytes stored in the events stream');
    this.eventsMaxBytes = gauge(
      'sonar_events_store_max_bytes',
      'The events stream byte bound (SONAR_EVENTS_MAX_BYTES); -1 when unbounded',
    );
    this.eventsFull = gauge(
      'sonar_events_store_full',
      '1 while new work is refused (store_full): the event log is near its bound',
    );

    const counter = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      new Counter<L>({ name, help, labelNames, registers });
    const publishes = counter('sonar_task_publishes_total', 'Tasks published to a dispatch queue');
    const requeues = counter('sonar_task_requeues_total', 'Tasks requeued, by reason', ['reason']);
    const recoveries = counter(
      'sonar_task_recoveries_total',
      'Counted recoveries: worker-lost requeues and deaths at the recovery limit',
    );
    const failures = counter('sonar_task_attempt_failures_total', 'Task attempts that failed');
    const finalized = counter('sonar_tasks_finalized_total', 'Tasks finalized (Succeeded)');
    const renewals = counter(
      'sonar_finalize_lease_renewals_total',
      'In-progress acks renewing a finalization job lease',
    );
    const sinkPaused = gauge(
      'sonar_results_sink_paused',
      '1 while the finalizer pool waits for its results sink to be reachable again',
    );
    sinkPaused.set(0);
    const sinkPauses = counter(
      'sonar_results_sink_pauses_total',
      'Times the finalizer pool paused because its results sink could not be reached',
    );
    const pass = new Histogram<'kind'>({
      name: 'sonar_reconcile_pass_duration_seconds',
      help: 'Duration of reconcile passes run by this backend while leader (full ticks and prompt passes)',
      labelNames: ['kind'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    // Observed where this backend's own write moved the task (never by a fold), so a
    // fleet's series sum to one observation per move.
    const stageSeconds = (name: string, help: string) =>
      new Histogram<'tag'>({
        name,
        help,
        labelNames: ['tag'],
        buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
        registers,
      });
    const stages = {
      queue: stageSeconds(
        'sonar_task_queue_wait_seconds',
        'Time from TaskPublished to TaskStarted, per tag, for the starts this backend wrote',
      ),
      run: stageSeconds(
        'sonar_task_run_seconds',
        'Time from TaskStarted to TaskResultAccepted, per tag, for the results this backend wrote',
      ),
      finalize: stageSeconds(
        'sonar_task_finalize_seconds',
        'Time from TaskResultAccepted to TaskFinalized, per tag, for the tasks this backend finalized',
      ),
    };
    const sweepFixes = new Counter<'repair'>({
      name: 'sonar_sweep_repairs_total',
      help: 'What full sweeps found and fixed, by repair (workersLost, dispatchPurged, ...)',
      labelNames: ['repair'],
      registers,
    });
    const sweeps = counter('sonar_sweeps_total', 'Full sweeps run by this backend');
    // The connection's own counts, read on scrape (they keep counting while nobody scrapes).
    const fromStats = (name: string, help: string, read: () => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    fromStats(
      'sonar_nats_disconnects_total',
      'Times the NATS connection was lost',
      () => ctx.contact.stats().disconnects,
    );
    fromStats(
      'sonar_nats_reconnects_total',
      'Times the NATS connection came back',
      () => ctx.contact.stats().reconnects,
    );
    fromStats(
      'sonar_nats_disconnected_seconds_total',
      'Time spent without a NATS connection, the current outage included',
      () => ctx.contact.stats().disconnectedMs / 1000,
    );
    this.connected = gauge('sonar_nats_connected', '1 while connected to NATS');
    this.jetstream = gauge('sonar_jetstream_answering', '1 while JetStream answers its probe');
    // Label children exist from the start, so a series reads 0 rather than being absent.
    for (const reason of ['publish-timeout', 'worker-lost', 'worker-released', 'operator']) {
      requeues.inc({ reason }, 0);
    }

    this.unsubscribe.push(
      ctx.loop.onApplied(({ event }) => {
        switch (event.type) {
          case 'TaskPublished':
            publishes.inc();
            break;
          case 'TaskRequeued':
            requeues.inc({ reason: event.data.reason });
            if (event.data.reason === 'worker-lost') recoveries.inc();
            break;
          case 'TaskDead':
            recoveries.inc();
            break;
          case 'TaskAttemptFailed':
            failures.inc();
            break;
          case 'TaskFinalized':
            finalized.inc();
            break;
          default:
            break;
        }
      }),
      onMetricSignal((s) => {
        if (s.nodeId !== ctx.nodeId) return;
        switch (s.kind) {
          case 'reconcile-pass':
            pass.observe({ kind: s.full ? 'full' : 'prompt' }, s.ms / 1000);
            break;
          case 'lease-renewal':
            renewals.inc();
            break;
          case 'sink-pause':
            sinkPaused.set(s.paused ? 1 : 0);
            if (s.paused) sinkPauses.inc();
            break;
          case 'task-stage':
            stages[s.stage].observe({ tag: s.tag }, s.ms / 1000);
            break;
          case 'sweep':
            sweeps.inc();
            for (const [repair, n] of Object.entries(s.counts)) {
              if (repair !== 'ms' && typeof n === 'number' && n > 0) sweepFixes.inc({ repair }, n);
            }
            break;
        }
      }),
    );
  }

  /** The exposition text, with every gauge read now. */
  async scrape(): Promise<string> {
    await this.refresh();
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  close(): void {
    for (const u of this.unsubscribe.splice(0)) u();
  }

  private async refresh(): Promise<void> {
    const { ctx } = this;
    const p = ctx.loop.projection;
    const counts = tasksByState(p);
    for (const s of TASK_STATES) this.tasks.set({ state: s }, counts[s]);
    this.poisoned.set(counts.Poisoned);
    const workerCounts = Object.fromEntries(WORKER_STATES.map((s) => [s, 0]));
    for (const w of p.workers.values()) {
      workerCounts[w.snapshot.value] = (workerCounts[w.snapshot.value] ?? 0) + 1;
    }
    for (const [state, n] of Object.entries(workerCounts)) this.workers.set({ state }, n);
    this.leader.set(p.leader?.nodeId === ctx.nodeId ? 1 : 0);
    this.position.set(ctx.loop.position);
    this.connected.set(ctx.contact.connection.connected ? 1 : 0);
    this.jetstream.set(ctx.contact.inContact ? 1 : 0);
    // Out of contact, the registry and the finalize queue cannot be read: the scrape still
    // answers, with what this process knows (the connection metrics above all).
    if (!ctx.contact.inContact) return;

    const [entries, depth, room] = await Promise.all([
      ctx.registry.live(),
      ctx.jsm.streams.info(ctx.names.streams.finalize).then((i) => i.state.messages),
      eventsStoreRoom(ctx).room(),
    ]);
    this.eventsBytes.set(room.bytes);
    this.eventsMaxBytes.set(room.maxBytes > 0 ? room.maxBytes : -1);
    this.eventsFull.set(room.full === true ? 1 : 0);
    const now = ctx.now();
    const fleet = readFleet(p, entries, now, ctx.config);
    const cap = capacityView(capacityAfter(p, fleet, new Set(), [], ctx.config));
    this.capacityTag.reset();
    for (const [tag, n] of Object.entries(cap.tags)) this.capacityTag.set({ tag }, n);
    this.capacityGlobal.set(cap.global);
    this.liveWorkers.set(fleet.live.size);
    this.eligibleWorkers.set(entries.filter((e) => isEligible(e, p, fleet.live, now, ctx)).length);
    this.finalizeDepth.set(depth);
  }
}
