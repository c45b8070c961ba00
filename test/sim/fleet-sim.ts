/**
 * A deterministic fleet simulation for the reconciler. A seeded PRNG drives a fleet
 * of workers on a simulated clock: they pull from per-tag queues, start (some slowly), run
 * (some for longer than orphanAge), fail, crash (silently, or seen by a supervisor), drain and
 * join. Every tick the real planner (`plan`, `progress`, `starvationEvents`,
 * `vanishedWorkers`) decides and its events are folded through the real machines
 * (`applyEvent`). Invariants are checked every tick, and the decision log is hashed.
 */
import { createHash } from 'node:crypto';
import type { Projection } from '../../actors/projection.js';
import { resolvePlanConfig } from '../../actors/reconciler/config.js';
import type { PlanConfig } from '../../actors/reconciler/config.js';
import type { ReconcilerEvent } from '../../actors/reconciler/decisions.js';
import type { LiveWorker } from '../../actors/reconciler/fleet.js';
import { plan } from '../../actors/reconciler/plan.js';
import { progress } from '../../actors/reconciler/progress.js';
import { recoveryEvents } from '../../actors/reconciler/recovery.js';
import { starvationEvents } from '../../actors/reconciler/starvation.js';
import { vanishedWorkers } from '../../actors/reconciler/vanished-workers.js';
import {
  T0,
  hexHash,
  subject,
  taskAttemptFailed,
  taskFinalized,
  taskPublished,
  taskRequeued,
  taskResultAccepted,
  taskStarted,
  workerDraining,
  workerJoined,
  workerLeft,
  workerLost,
} from '../helpers/event-builders.js';
import { World } from '../helpers/reconciler-world.js';
import { checkPlacement, eligibleSlots } from './invariants.js';
import { checkNotBefore, checkPriorityOrder, wasDelayed } from './placement-invariants.js';
import { RateWatch, checkStarvedHaveNoWorker } from './rate-invariants.js';
import { Prng } from './prng.js';

export interface SimOptions {
  seed: number;
  /** Workers at the start (the fleet is topped up towards this as workers crash or leave). */
  workers: number;
  tags: number;
  runs: number;
  tasksPerRun: number;
  /** Ticks at most before the simulation gives up. */
  maxTicks: number;
  config?: Partial<PlanConfig>;
  /**
   * Mixed priorities and delays: steps of priorities -1 to 2 by run, some tasks with a
   * priority of their own, some tasks and steps delayed by up to 10 minutes.
   */
  placement?: boolean;
}

export interface SimStats {
  ticks: number;
  tasks: number;
  workersSeen: number;
  crashesSilent: number;
  crashesExited: number;
  drains: number;
  joins: number;
  published: number;
  requeuedPublishTimeout: number;
  requeuedWorkerLost: number;
  released: number;
  dead: number;
  starvedEvents: number;
  servedEvents: number;
  workersLostExpired: number;
  longTasksDone: number;
  slowStarts: number;
  maxInFlight: number;
  /** Published tasks that had a notBefore of their own or their step's. */
  delayedPlaced: number;
  /** Most tasks delayed at once (plan's `delayed`, summed). */
  maxDelayed: number;
  /** Publishes to rate-limited tags. */
  ratePublished: number;
  /** Ticks x rate-limited tags where the bucket held back a task that was waiting for it. */
  rateHeld: number;
  tasksByState: Record<string, number>;
  runsByState: Record<string, number>;
}

export interface SimResult {
  /** sha256 of the decision log: every tick's decisions and the events they led to. */
  hash: string;
  violations: string[];
  stats: SimStats;
  /** Tasks not terminal at the end (must be none). */
  unfinished: string[];
}

const TICK_MS = 2_000;
const PULSE_MS = 5_000;
const ACK_WAIT_MS = 60_000;
const DRAIN_GRACE_MS = 20_000;
const LONG_MS = [15 * 60_000, 40 * 60_000] as const;
const SHORT_MS = [3_000, 90_000] as const;
const FINALIZE_MS = 1_000;

interface Held {
  key: string;
  attemptId: string;
  startAt: number;
  doneAt: number;
  started: boolean;
}

interface SimWorker {
  id: string;
  tags: string[];
  slots: number;
  state: 'up' | 'draining' | 'crashed' | 'gone';
  /** Server time of the last registry put; null once the key is deleted. */
  lastPut: number | null;
  nextPulse: number;
  entry: LiveWorker | null;
  held: Map<string, Held>;
  slowStart: boolean;
  drainDeadline: number;
  pullFrom: number;
}

interface Message {
  key: string;
  attemptId: string;
}

/** A FIFO with O(1) shift. */
class Queue {
  private items: Message[] = [];
  private head = 0;
  push(m: Message): void {
    this.items.push(m);
  }
  shift(): Message | undefined {
    if (this.head >= this.items.length) return undefined;
    const m = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return m;
  }
}

/** What a task does when it runs, fixed at creation. */
type Behaviour = 'normal' | 'long' | 'bad' | 'killer';

export class FleetSim {
  private readonly w = new World();
  private readonly p: Projection = this.w.p;
  private readonly rng: Prng;
  private readonly config: PlanConfig;
  private readonly start = Date.parse(T0);
  private t = this.start;
  private iso = T0;
  private readonly workers = new Map<string, SimWorker>();
  private readonly queues = new Map<string, Queue>();
  private delayed: { at: number; tag: string; m: Message }[] = [];
  private readonly tagNames: string[];
  private readonly behaviour = new Map<string, Behaviour>();
  private readonly attemptTag = new Map<string, string>();
  private nextWorker = 0;
  private nextAttempt = 0;
  private readonly hash = createHash('sha256');
  private readonly violations: string[] = [];
  private readonly stats: SimStats = {
    ticks: 0,
    tasks: 0,
    workersSeen: 0,
    crashesSilent: 0,
    crashesExited: 0,
    drains: 0,
    joins: 0,
    published: 0,
    requeuedPublishTimeout: 0,
    requeuedWorkerLost: 0,
    released: 0,
    dead: 0,
    starvedEvents: 0,
    servedEvents: 0,
    workersLostExpired: 0,
    longTasksDone: 0,
    slowStarts: 0,
    maxInFlight: 0,
    delayedPlaced: 0,
    maxDelayed: 0,
    ratePublished: 0,
    rateHeld: 0,
    tasksByState: {},
    runsByState: {},
  };
  private readonly submitAt: number[] = [];
  private readonly rateWatch: RateWatch;

  constructor(private readonly opts: SimOptions) {
    this.rng = new Prng(opts.seed);
    this.config = resolvePlanConfig(opts.config);
    this.rateWatch = new RateWatch(this.config.tagRates ?? {});
    // `rare` has a handful of workers that all crash for a while: its steps starve.
    this.tagNames = [
      ...Array.from({ length: opts.tags - 1 }, (_, i) => `tag${String(i).padStart(2, '0')}`),
      'rare',
    ];
    for (const tag of this.tagNames) this.queues.set(tag, new Queue());
    for (let i = 0; i < opts.workers; i++) this.join();
    for (let r = 0; r < opts.runs; r++) this.submitAt.push(this.start + r * 20_000);
  }

  run(): SimResult {
    let submitted = 0;
    for (let tick = 0; tick < this.opts.maxTicks; tick++) {
      this.stats.ticks = tick + 1;
      while (submitted < this.submitAt.length && this.submitAt[submitted]! <= this.t) {
        this.submit(submitted++);
      }
      this.churn();
      this.returnDelayed();
      for (const worker of this.workers.values()) this.act(worker);
      this.finalize();
      this.reconcile();
      if (submitted === this.submitAt.length && this.done()) break;
      this.t += TICK_MS;
      this.iso = new Date(this.t).toISOString();
    }
    return this.result();
  }

  // ---- the world ---------------------------------------------------------------------------

  private submit(r: number): void {
    const runId = `run${r}`;
    const tag = (i: number) => this.tagNames[(r * 5 + i) % (this.tagNames.length - 1)]!;
    const steps = [
      {
        id: 'a',
        tasks: Math.round(this.opts.tasksPerRun * 0.55),
        tags: [tag(0)],
        maxConcurrent: r % 2 ? 60 : undefined,
      },
      { id: 'b', tasks: Math.round(this.opts.tasksPerRun * 0.3), tags: [tag(1)], after: ['a'] },
      {
        id: 'c',
        tasks: this.opts.tasksPerRun - Math.round(this.opts.tasksPerRun * 0.85),
        tags: [r % 4 === 1 ? 'rare' : tag(2)],
      },
    ];
    this.w.run(
      runId,
      steps.map((s) => ({
        ...s,
        // Some tasks name two tags of their own.
        taskTags: (i: number) => (i % 10 === 3 ? [s.tags[0]!, tag(3)] : undefined),
        ...(this.opts.placement && this.placementOf(r, s.id)),
      })),
      { time: this.iso },
    );
    for (const s of steps) {
      for (let i = 0; i < s.tasks; i++) {
        const key = `${runId}.${s.id}-${i}`;
        const kind: Behaviour =
          r % 5 === 4 && s.id === 'a' && i === 7
            ? 'bad'
            : r % 5 === 4 && s.id === 'c' && i === 2
              ? 'killer'
              : this.rng.chance(0.02)
                ? 'long'
                : 'normal';
        this.behaviour.set(key, kind);
      }
    }
    this.stats.tasks += this.opts.tasksPerRun;
  }

  /** A run's step priority and delay, and its tasks' own (seeded: the same every run). */
  private placementOf(r: number, stepId: string) {
    const own = new Map<number, { priority?: number; delayMs?: number }>();
    const draws = this.opts.tasksPerRun;
    for (let i = 0; i < draws; i++) {
      const priority = this.rng.chance(0.05) ? this.rng.int(-2, 3) : undefined;
      const delayMs = this.rng.chance(0.1) ? this.rng.int(0, 600_000) : undefined;
      if (priority !== undefined || delayMs !== undefined) {
        own.set(i, {
          ...(priority !== undefined && { priority }),
          ...(delayMs !== undefined && { delayMs }),
        });
      }
    }
    return {
      priority: (r % 4) - 1,
      ...(stepId === 'c' && r % 3 === 1 && { delayMs: 300_000 }),
      taskOwn: (i: number) => own.get(i) ?? {},
    };
  }

  private join(forceRare = false): void {
    const id = `w${this.nextWorker++}`;
    const rare = forceRare || this.nextWorker % 97 === 0 || this.nextWorker === 1;
    const count = this.rng.int(1, 3);
    const tags = rare
      ? ['rare']
      : [
          ...new Set(
            Array.from({ length: count }, () => this.rng.pick(this.tagNames.slice(0, -1))),
          ),
        ].sort();
    const slots = forceRare ? 4 : this.rng.int(1, 4);
    const worker: SimWorker = {
      id,
      tags,
      slots,
      state: 'up',
      lastPut: null,
      nextPulse: this.t,
      entry: null,
      held: new Map(),
      slowStart: this.rng.chance(0.1),
      drainDeadline: 0,
      pullFrom: this.rng.int(0, 5),
    };
    this.workers.set(id, worker);
    this.w.add(subject.worker(id), workerJoined({ workerId: id, tags, slots, host: id }, this.iso));
    this.stats.workersSeen++;
    if (this.stats.ticks > 0) this.stats.joins++;
  }

  /** Random crashes, drains and joins; `rare` workers all crash at 20 min, come back at 45. */
  private churn(): void {
    const minute = (this.t - this.start) / 60_000;
    let up = 0;
    for (const worker of this.workers.values()) {
      if (worker.state !== 'up') continue;
      const rareOutage = worker.tags[0] === 'rare' && minute >= 20 && minute < 45;
      if (rareOutage || this.rng.chance(0.0003))
        this.crash(worker, !rareOutage && this.rng.chance(0.5));
      else if (this.rng.chance(0.0002)) this.drain(worker);
      else up++;
    }
    if (minute >= 45 && minute < 45.05) for (let i = 0; i < 8; i++) this.join(true);
    while (up < this.opts.workers && this.rng.chance(0.3)) {
      this.join();
      up++;
    }
  }

  private crash(worker: SimWorker, exited: boolean): void {
    worker.state = 'crashed';
    // Fetched but not started: the message comes back after the ack wait.
    for (const h of worker.held.values()) {
      if (!h.started)
        this.delayed.push({
          at: this.t + ACK_WAIT_MS,
          tag: this.attemptTag.get(h.attemptId)!,
          m: h,
        });
    }
    worker.held.clear();
    if (exited) {
      // A supervisor saw the process end: it deletes the key and reports it at once.
      const lastPulseAt = worker.lastPut === null ? null : new Date(worker.lastPut).toISOString();
      worker.lastPut = null;
      this.w.add(
        subject.worker(worker.id),
        workerLost({ reason: 'exited', lastPulseAt }, this.iso),
      );
      this.stats.crashesExited++;
    } else {
      this.stats.crashesSilent++;
    }
  }

  private drain(worker: SimWorker): void {
    worker.state = 'draining';
    worker.drainDeadline = this.t + DRAIN_GRACE_MS;
    worker.nextPulse = this.t; // pulses active:false at once
    this.w.add(subject.worker(worker.id), workerDraining({ reason: 'shutdown' }, this.iso));
    // Fetched but not started: nak'ed back to the queue.
    for (const [key, h] of worker.held) {
      if (h.started) continue;
      this.queues.get(this.attemptTag.get(h.attemptId)!)!.push(h);
      worker.held.delete(key);
    }
    this.stats.drains++;
  }

  private returnDelayed(): void {
    if (this.delayed.length === 0) return;
    const due = this.delayed.filter((d) => d.at <= this.t);
    this.delayed = this.delayed.filter((d) => d.at > this.t);
    for (const d of due) this.queues.get(d.tag)!.push(d.m);
  }

  private isCurrent(key: string, attemptId: string, state: string): boolean {
    const task = this.p.tasks.get(key)?.snapshot;
    return task?.value === state && task.context.attemptId === attemptId;
  }

  private taskSubject(key: string): string {
    const [runId, taskId] = key.split('.') as [string, string];
    return subject.task(runId, taskId);
  }

  private act(worker: SimWorker): void {
    if (worker.state === 'crashed' || worker.state === 'gone') return;
    if (worker.state === 'draining' && this.t >= worker.drainDeadline) {
      for (const h of worker.held.values()) {
        if (!this.isCurrent(h.key, h.attemptId, 'Running')) continue;
        this.w.add(
          this.taskSubject(h.key),
          taskRequeued(
            {
              attemptId: h.attemptId,
              reason: 'worker-released',
              recoveries: this.p.tasks.get(h.key)!.snapshot.context.recoveries,
            },
            this.iso,
          ),
        );
        this.stats.released++;
      }
      worker.held.clear();
      worker.state = 'gone';
      worker.lastPut = null;
      this.w.add(subject.worker(worker.id), workerLeft(this.iso));
      return;
    }
    for (const [key, h] of worker.held) {
      if (!h.started) {
        if (this.t < h.startAt) continue;
        if (!this.isCurrent(key, h.attemptId, 'Published')) {
          worker.held.delete(key); // a stale attempt: `start` would refuse it
          continue;
        }
        this.w.add(
          this.taskSubject(key),
          taskStarted({ attemptId: h.attemptId, workerId: worker.id }, this.iso),
        );
        h.started = true;
        const kind = this.behaviour.get(key);
        if (kind === 'killer') {
          // The payload kills its worker: the supervisor sees it exit.
          this.crash(worker, true);
          return;
        }
        const [lo, hi] = kind === 'long' ? LONG_MS : SHORT_MS;
        h.doneAt = this.t + this.rng.int(lo, hi);
        continue;
      }
      if (this.t < h.doneAt) continue;
      worker.held.delete(key);
      if (!this.isCurrent(key, h.attemptId, 'Running')) continue;
      const kind = this.behaviour.get(key);
      if (kind === 'bad' || this.rng.chance(0.01)) {
        const retryAt = new Date(this.t + 2_000).toISOString();
        this.w.add(
          this.taskSubject(key),
          taskAttemptFailed(
            { attemptId: h.attemptId, workerId: worker.id, retryable: kind !== 'bad', retryAt },
            this.iso,
          ),
        );
      } else {
        this.w.add(
          this.taskSubject(key),
          taskResultAccepted({ attemptId: h.attemptId, workerId: worker.id }, this.iso),
        );
        if (kind === 'long') this.stats.longTasksDone++;
      }
    }
    if (this.t >= worker.nextPulse) {
      worker.lastPut = this.t;
      worker.nextPulse = this.t + PULSE_MS;
      worker.entry = {
        workerId: worker.id,
        tags: worker.tags,
        slots: worker.slots,
        active: worker.state === 'up',
        pulseAt: this.iso,
      };
    }
    if (worker.state === 'up') this.pull(worker);
  }

  /** Pulls up to the free slots, tag by tag, starting from a rotating tag. */
  private pull(worker: SimWorker): void {
    let free = worker.slots - worker.held.size;
    for (let i = 0; i < worker.tags.length && free > 0; i++) {
      const tag = worker.tags[(worker.pullFrom + i) % worker.tags.length]!;
      const queue = this.queues.get(tag)!;
      for (let m = queue.shift(); m !== undefined; m = free > 0 ? queue.shift() : undefined) {
        if (!this.isCurrent(m.key, m.attemptId, 'Published')) continue; // stale: dropped
        const slow = worker.slowStart && this.rng.chance(0.5);
        if (slow) this.stats.slowStarts++;
        const delay = slow ? this.rng.int(5_000, 60_000) : this.rng.int(100, 1_500);
        worker.held.set(m.key, { ...m, startAt: this.t + delay, doneAt: Infinity, started: false });
        free--;
      }
    }
    worker.pullFrom++;
  }

  /** The finalizer pool: a result is finalized about a second after it was accepted. */
  private finalize(): void {
    for (const key of [...this.p.tasksByState.Finalizing]) {
      const c = this.p.tasks.get(key)!.snapshot.context;
      if (Date.parse(c.since!) + FINALIZE_MS > this.t) continue;
      this.w.add(
        this.taskSubject(key),
        taskFinalized({ attemptId: c.attemptId!, resultKey: key }, this.iso),
      );
    }
  }

  /** The registry as a backend reads it at `t`: every key that has not expired. */
  private registry(): LiveWorker[] {
    const out: LiveWorker[] = [];
    for (const worker of this.workers.values()) {
      if (worker.lastPut === null || worker.entry === null) continue;
      if (this.t - worker.lastPut >= this.config.pulseTtlMs) continue; // the bucket TTL
      out.push(worker.entry);
    }
    return out;
  }

  // ---- the reconciler ----------------------------------------------------------------------

  private emit(e: ReconcilerEvent): void {
    if (!this.w.emit(e, this.iso))
      this.violations.push(`t=${this.iso}: ${e.type} ${e.ref.key} refused`);
  }

  private reconcile(): void {
    const entries = this.registry();
    const config = {
      ...this.config,
      ageFloorPassed: this.t - this.start >= this.config.pulseTtlMs,
    };
    const slots = eligibleSlots(this.p, entries, this.t, config);
    const d = plan(this.p, entries, this.t, config);

    for (const r of [...d.requeue, ...d.dead.map((x) => ({ ...x, reason: 'worker-lost' }))]) {
      if (r.reason !== 'worker-lost') continue;
      const workerId = this.p.tasks.get(r.task)!.snapshot.context.workerId!;
      const state = this.workers.get(workerId)?.state;
      if (state === 'up' || state === 'draining') {
        this.violations.push(`t=${this.iso}: ${r.task} recovered from live worker ${workerId}`);
      }
    }
    for (const e of recoveryEvents(this.p, d)) this.emit(e);
    this.stats.dead += d.dead.length;
    for (const r of d.requeue) {
      if (r.reason === 'worker-lost') this.stats.requeuedWorkerLost++;
      else this.stats.requeuedPublishTimeout++;
    }
    this.violations.push(...checkNotBefore(this.p, d, this.t).map((v) => `t=${this.iso}: ${v}`));
    if (this.config.priorityAgingMs === 0) {
      const order = checkPriorityOrder(this.p, d, this.t);
      this.violations.push(...order.map((v) => `t=${this.iso}: ${v}`));
    }
    const delayedNow = Object.values(d.delayed ?? {}).reduce((a, b) => a + b, 0);
    this.stats.maxDelayed = Math.max(this.stats.maxDelayed, delayedNow);
    for (const { task, tag } of d.publish) {
      if (wasDelayed(this.p, task)) this.stats.delayedPlaced++;
      const attemptId = `a${this.nextAttempt++}`;
      const attempt = this.p.tasks.get(task)!.snapshot.context.attempt + 1;
      this.w.add(
        this.taskSubject(task),
        taskPublished({ attempt, attemptId, tag, tokenHash: hexHash(attemptId) }, this.iso),
      );
      this.attemptTag.set(attemptId, tag);
      this.queues.get(tag)!.push({ key: task, attemptId });
    }
    this.stats.published += d.publish.length;
    for (const v of this.rateWatch.check(d, this.t)) this.violations.push(`t=${this.iso}: ${v}`);
    for (const v of checkStarvedHaveNoWorker(this.p, d, slots.byTag)) {
      this.violations.push(`t=${this.iso}: ${v}`);
    }
    for (const [tag, { left }] of Object.entries(d.rateLimited ?? {})) {
      const placed = d.publish.filter((x) => x.tag === tag).length;
      this.stats.ratePublished += placed;
      // The bucket ran dry with tasks on the tag still Pending: the rate held them back.
      if (placed === left && this.pendingOn(tag)) this.stats.rateHeld++;
    }
    for (const problem of checkPlacement(this.p, slots, d, config)) {
      this.violations.push(`t=${this.iso}: ${problem}`);
    }
    this.stats.maxInFlight = Math.max(
      this.stats.maxInFlight,
      this.p.tasksByState.Published.size + this.p.tasksByState.Running.size,
    );

    const starvation = starvationEvents(this.p, d.starved);
    for (const e of starvation) {
      this.emit(e);
      if (e.type === 'StepStarved') this.stats.starvedEvents++;
      else this.stats.servedEvents++;
    }
    const lost = vanishedWorkers(this.p, entries, this.t, config).map((e): ReconcilerEvent => {
      const last = this.workers.get(e.ref.key)?.lastPut;
      return e.type === 'WorkerLost' && last != null
        ? { ...e, data: { ...e.data, lastPulseAt: new Date(last).toISOString() } }
        : e;
    });
    for (const e of lost) this.emit(e);
    this.stats.workersLostExpired += lost.length;
    const progressed: string[] = [];
    for (let round = 0; round < 10; round++) {
      const events = progress(this.p);
      if (events.length === 0) break;
      for (const e of events) {
        this.emit(e);
        progressed.push(`${e.type} ${e.ref.key}`);
      }
    }
    this.hash.update(
      JSON.stringify({
        t: this.iso,
        d,
        starvation: starvation.map((e) => `${e.type} ${e.ref.key}`),
        lost: lost.map((e) => e.ref.key),
        progressed,
      }),
    );
    this.hash.update('\n');
  }

  /** Whether a Ready step still has Pending tasks naming `tag`. */
  private pendingOn(tag: string): boolean {
    for (const key of this.p.activeSteps) {
      if (this.p.steps.get(key)!.snapshot.value !== 'Ready') continue;
      if ((this.p.stepIndex.get(key)?.pendingTags.get(tag) ?? 0) > 0) return true;
    }
    return false;
  }

  private done(): boolean {
    const open = this.p.tasksByState;
    return (
      this.p.activeRuns.size === 0 &&
      open.Pending.size +
        open.Published.size +
        open.Running.size +
        open.Finalizing.size +
        open.Poisoned.size ===
        0
    );
  }

  private result(): SimResult {
    const unfinished: string[] = [];
    for (const [key, { snapshot }] of this.p.tasks) {
      const state = snapshot.value;
      this.stats.tasksByState[state] = (this.stats.tasksByState[state] ?? 0) + 1;
      if (snapshot.status !== 'done') unfinished.push(`${key} ${state}`);
    }
    for (const { snapshot } of this.p.runs.values()) {
      this.stats.runsByState[snapshot.value] = (this.stats.runsByState[snapshot.value] ?? 0) + 1;
    }
    return {
      hash: this.hash.digest('hex'),
      violations: this.violations,
      stats: this.stats,
      unfinished,
    };
  }
}
