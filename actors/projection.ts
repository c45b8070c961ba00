import { IllegalTransitionError } from './errors.js';
import { decodeEvent, parseEventSubject } from './events.js';
import type { AggregateKind, AggregateRef, SonarEvent } from './events.js';
import type { RunExpired, WorkerExpired } from './retention/retention.events.js';
import { runMachine } from './run/run.machine.js';
import { scheduleMachine } from './schedule/schedule.machine.js';
import type { ScheduleContext } from './schedule/schedule.machine.js';
import type { ScheduleEvent } from './schedule/schedule.events.js';
import type { RunContext } from './run/run.machine.js';
import type { RunEvent } from './run/run.events.js';
import { stepMachine } from './step/step.machine.js';
import type { StepContext } from './step/step.machine.js';
import type { StepEvent } from './step/step.events.js';
import { initialTaskContext, taskMachine } from './task/task.machine.js';
import type { TaskContext, TaskState } from './task/task.machine.js';
import type { TaskEvent } from './task/task.events.js';
import { MAX_RATE_WINDOW_MS, RATE_HISTORY } from './reconciler/tag-rates.js';
import { TimedTasks } from './timed-tasks.js';
import { createTransitioner } from './transitioner.js';
import type { ActionNames, Snap } from './transitioner.js';
import { workerMachine } from './worker/worker.machine.js';
import type { WorkerContext } from './worker/worker.machine.js';
import type { WorkerEvent } from './worker/worker.events.js';

export type TaskSnapshot = Snap<TaskContext>;
export type StepSnapshot = Snap<StepContext>;
export type RunSnapshot = Snap<RunContext>;
export type WorkerSnapshot = Snap<WorkerContext>;
export type ScheduleSnapshot = Snap<ScheduleContext>;

/** One aggregate's current snapshot and the stream sequence of its last event (for OCC). */
export interface Aggregate<S> {
  snapshot: S;
  seq: number;
}

/** Non-terminal task states, indexed so that a reconcile tick never walks finished tasks. */
export const OPEN_TASK_STATES = [
  'Pending',
  'Published',
  'Running',
  'Finalizing',
  'Poisoned',
] as const;
export type OpenTaskState = (typeof OPEN_TASK_STATES)[number];

/**
 * What the reconciler reads about one step instead of walking its tasks, so that a tick costs
 * what can move, not every task ever created (DESIGN.md section 5).
 */
export interface StepIndex {
  /** The step's tasks by state, terminal states included. */
  counts: Record<TaskState, number>;
  /** Each task's position in the step's `stepTasks` list (its `TaskCreated` order). */
  order: Map<string, number>;
  /** Pending tasks never published, in `TaskCreated` order (Set insertion order). */
  fresh: Set<string>;
  /** Pending tasks back from an attempt (requeued, or a retried failure); sort by `order`. */
  returned: Set<string>;
  /** How many Pending tasks name each target tag (for starvation, without a walk). */
  pendingTags: Map<string, number>;
  /**
   * The `fresh` tasks without a `notBefore`, by their own priority (undefined: their step's),
   * each in `TaskCreated` order: a tick reads the ones of a priority without passing over others.
   */
  lanes: Map<number | undefined, Set<string>>;
  /**
   * The `fresh` tasks with a `notBefore`, by priority and by time: a tick finds the due ones and
   * counts the others without passing over those still to come.
   */
  timed: TimedTasks;
}

/**
 * What is left of a run once `RunExpired` evicted it (SONAR_RETENTION): how it ended, so that
 * `sonar status` and the dashboard can still say so, without its steps, tasks and inputs.
 */
export interface ExpiredRun {
  runId: string;
  state: RunExpired['data']['state'];
  reason: string | null;
  submittedAt: string;
  endedAt: string;
  taskCount: number;
  /** Tasks by final state, zero counts left out. */
  tasks: RunExpired['data']['tasks'];
  /** The `RunExpired` event's server time and stream sequence. */
  expiredAt: string;
  seq: number;
}

/**
 * The whole state, folded from events. It is only ever changed by `applyEvent`, which both
 * replay and the live projection loop call: the write path and the replay path share it.
 *
 * Snapshots (src/backend/snapshots/snapshot-codec.ts) copy it field by field and rely on aggregate
 * snapshots and contexts never being mutated in place: a new field, or a change to how
 * `applyDecoded` indexes, needs the codec updated and its SNAPSHOT_FORMAT bumped.
 */
export interface Projection {
  tasks: Map<string, Aggregate<TaskSnapshot>>;
  steps: Map<string, Aggregate<StepSnapshot>>;
  runs: Map<string, Aggregate<RunSnapshot>>;
  workers: Map<string, Aggregate<WorkerSnapshot>>;
  /** Schedules by name, in `ScheduleCreated` order (deleted ones too). */
  schedules: Map<string, Aggregate<ScheduleSnapshot>>;
  /** Task keys of each step (`<runId>.<stepId>`), in `TaskCreated` order. */
  stepTasks: Map<string, string[]>;
  /** Open tasks by state; terminal tasks are in no set. */
  tasksByState: Record<OpenTaskState, Set<string>>;
  /** Per-step task counts and Pending queues, keyed `<runId>.<stepId>`. */
  stepIndex: Map<string, StepIndex>;
  /**
   * Steps not finished, or finished with tasks not yet terminal, in `StepCreated` order: the
   * only steps a reconcile tick looks at.
   */
  activeSteps: Set<string>;
  /** Runs still Running. */
  activeRuns: Set<string>;
  /** Runs evicted by `RunExpired`, in expiry order: only their summaries are kept. */
  expiredRuns: Map<string, ExpiredRun>;
  /**
   * Workers Active or Draining, in `WorkerJoined` order: what a reconcile tick walks, so
   * that its cost does not grow with every worker that ever joined and left.
   */
  workersInService: Set<string>;
  /**
   * Per tag, the times (ms) of its recent `TaskPublished` events, ascending: what a tag's rate
   * limit is computed from (actors/reconciler/tag-rates.ts). Bounded: at most
   * {@link RATE_HISTORY} per tag, none older than {@link MAX_RATE_WINDOW_MS} behind the tag's
   * newest, so a window or burst a rate may have always sees every publish in it.
   */
  publishTimes: Map<string, number[]>;
  /**
   * The last `ReconcilerElected`; `honors` absent when an older leader wrote it, `tagRates`
   * when it enforces no rate limit too.
   */
  leader: {
    nodeId: string;
    time: string;
    seq: number;
    honors?: string[];
    tagRates?: string;
  } | null;
  /** Stream sequence of the last event applied. */
  lastSeq: number;
}

export function createProjection(): Projection {
  return {
    tasks: new Map(),
    steps: new Map(),
    runs: new Map(),
    workers: new Map(),
    schedules: new Map(),
    stepTasks: new Map(),
    tasksByState: {
      Pending: new Set(),
      Published: new Set(),
      Running: new Set(),
      Finalizing: new Set(),
      Poisoned: new Set(),
    },
    stepIndex: new Map(),
    activeSteps: new Set(),
    activeRuns: new Set(),
    expiredRuns: new Map(),
    workersInService: new Set(),
    publishTimes: new Map(),
    leader: null,
    lastSeq: 0,
  };
}

/** A stored event as it comes off the stream or out of a JSONL line. */
export interface EventRecord {
  seq: number;
  subject: string;
  time: string;
  type: unknown;
  data: unknown;
  v?: number;
  /** The event id (`Nats-Msg-Id`), when known. */
  id?: string;
  /** Set when the stored payload could not be decoded at all (not JSON, no envelope). */
  decodeError?: string;
  /**
   * True when `type` and `data` are already what `decodeEvent` gives for this payload: the
   * backend's own write, known by its bytes (src/backend/projection/own-writes.ts), so `applyEvent` does
   * not validate it again. Never set for a record read from a file or another writer.
   */
  validated?: boolean;
}

/** What one event did: the backend carries out `actions` after a successful append. */
export interface Applied {
  ok: true;
  ref: AggregateRef;
  event: SonarEvent;
  from: string | null;
  to: string;
  actions: ActionNames;
}

export type ApplyOutcome = Applied | { ok: false; reason: string };

const machines = {
  task: createTransitioner(taskMachine),
  step: createTransitioner(stepMachine),
  run: createTransitioner(runMachine),
  worker: createTransitioner(workerMachine),
  schedule: createTransitioner(scheduleMachine),
};

const creators: Record<string, AggregateKind> = {
  TaskCreated: 'task',
  StepCreated: 'step',
  RunSubmitted: 'run',
  WorkerJoined: 'worker',
  ScheduleCreated: 'schedule',
};

type AnySnapshot = TaskSnapshot | StepSnapshot | RunSnapshot | WorkerSnapshot | ScheduleSnapshot;

function tableOf(p: Projection, kind: AggregateKind): Map<string, Aggregate<AnySnapshot>> | null {
  switch (kind) {
    case 'task':
      return p.tasks;
    case 'step':
      return p.steps;
    case 'run':
      return p.runs;
    case 'worker':
      return p.workers;
    case 'schedule':
      return p.schedules;
    case 'system':
      return null;
  }
}

/**
 * The entry `ref` names, with the stream sequence of its last event: for the system
 * aggregate, the last `ReconcilerElected`. Undefined while the aggregate has no event.
 */
export function aggregateOf(p: Projection, ref: AggregateRef): { seq: number } | undefined {
  if (ref.kind === 'system') return p.leader ?? undefined;
  return tableOf(p, ref.kind)!.get(ref.key);
}

/** The aggregate key an event's own data names, for creation events (checked against the subject). */
function keyInData(event: SonarEvent): string | null {
  switch (event.type) {
    case 'TaskCreated':
      return `${event.data.runId}.${event.data.taskId}`;
    case 'StepCreated':
      return `${event.data.runId}.${event.data.stepId}`;
    case 'RunSubmitted':
      return event.data.runId;
    case 'WorkerJoined':
      return event.data.workerId;
    case 'ScheduleCreated':
      return event.data.name;
    default:
      return null;
  }
}

/** What an event would do: the next state, and the aggregate's sequence to expect on append. */
export interface Evaluation {
  next: AnySnapshot | null;
  from: string | null;
  to: string;
  actions: ActionNames;
  seq: number;
  /** The aggregate's current entry, when it exists (saves applyDecoded a second lookup). */
  entry: Aggregate<AnySnapshot> | undefined;
}

/**
 * Computes what `event` would do to its aggregate, without changing the projection. The
 * backend calls this before appending (an event the machine refuses is never written) and
 * uses `seq` as the append's expected last subject sequence.
 */
export function evaluate(p: Projection, ref: AggregateRef, event: SonarEvent): Evaluation {
  if (ref.kind === 'system') {
    if (event.type !== 'ReconcilerElected')
      throw new IllegalTransitionError('system', null, event.type);
    return {
      next: null,
      from: null,
      to: 'Elected',
      actions: [],
      seq: p.leader?.seq ?? 0,
      entry: undefined,
    };
  }
  if (event.type === 'RunExpired' || event.type === 'WorkerExpired') {
    return evaluateExpiry(p, ref, event);
  }
  const kind = creators[event.type];
  const table = tableOf(p, ref.kind)!;
  const current = table.get(ref.key);
  if (kind !== undefined) {
    if (kind !== ref.kind || keyInData(event) !== ref.key) {
      throw new IllegalTransitionError(ref.kind, `subject key ${ref.key}`, event.type);
    }
    if (current) throw new IllegalTransitionError(ref.kind, current.snapshot.value, event.type);
    // An expired run stays gone: nothing may be created under its id again.
    const ofRun = ref.kind !== 'worker' && ref.kind !== 'schedule';
    if (ofRun && p.expiredRuns.has(runIdOfKey(ref.key))) {
      throw new IllegalTransitionError(ref.kind, 'Expired', event.type);
    }
    const [next, actions] = initialOf(ref.kind, event);
    return { next, from: null, to: next.value, actions, seq: 0, entry: undefined };
  }
  if (!current) throw new IllegalTransitionError(ref.kind, 'none', event.type);
  const step = nextOf(ref.kind, current.snapshot, event);
  if (!step) throw new IllegalTransitionError(ref.kind, current.snapshot.value, event.type);
  return {
    next: step[0],
    from: current.snapshot.value,
    to: step[0].value,
    actions: step[1],
    seq: current.seq,
    entry: current,
  };
}

/** The run id of a run, step or task key (`<runId>` or `<runId>.<id>`). */
const runIdOfKey = (key: string): string => {
  const dot = key.indexOf('.');
  return dot === -1 ? key : key.slice(0, dot);
};

/**
 * `RunExpired` and `WorkerExpired` remove an aggregate instead of moving it. A run may expire
 * only once it is finished and none of its tasks is open (a Poisoned task can still be
 * retried), and only with its own final state; a worker only once it is Left or Lost.
 * `RunExpired` is appended onto the run's subject after retention purged it, hence the
 * expected sequence 0: it is stored only on an empty subject, and so at most once. A run the
 * projection does not hold (its events purged, the snapshot that held it lost) expires too:
 * the event carries its summary.
 */
function evaluateExpiry(
  p: Projection,
  ref: AggregateRef,
  event: RunExpired | WorkerExpired,
): Evaluation {
  const refuse = (state: unknown) => new IllegalTransitionError(ref.kind, state, event.type);
  if (event.type === 'WorkerExpired') {
    if (ref.kind !== 'worker') throw refuse(`subject key ${ref.key}`);
    const current = p.workers.get(ref.key);
    if (!current) throw refuse('none');
    if (current.snapshot.status !== 'done') throw refuse(current.snapshot.value);
    const from = current.snapshot.value;
    return { next: null, from, to: 'Expired', actions: [], seq: current.seq, entry: current };
  }
  if (ref.kind !== 'run' || event.data.runId !== ref.key) {
    throw refuse(`subject key ${ref.key}`);
  }
  if (p.expiredRuns.has(ref.key)) throw refuse('Expired');
  const current = p.runs.get(ref.key);
  if (current) {
    const run = current.snapshot;
    if (run.status !== 'done' || run.value !== event.data.state) throw refuse(run.value);
    if (run.context.stepIds.some((s) => p.activeSteps.has(`${ref.key}.${s}`))) {
      throw refuse(`${run.value} with open tasks`);
    }
  }
  const from = current?.snapshot.value ?? null;
  return { next: null, from, to: 'Expired', actions: [], seq: 0, entry: current };
}

/** Forgets an expired run's run, steps and tasks (with their inputs), keeping its summary. */
function evictRun(p: Projection, event: RunExpired, seq: number): void {
  const { runId } = event.data;
  const run = p.runs.get(runId);
  for (const stepId of run?.snapshot.context.stepIds ?? []) {
    const key = `${runId}.${stepId}`;
    for (const taskKey of p.stepTasks.get(key) ?? []) p.tasks.delete(taskKey);
    p.stepTasks.delete(key);
    p.stepIndex.delete(key);
    p.steps.delete(key);
    p.activeSteps.delete(key);
  }
  p.runs.delete(runId);
  p.activeRuns.delete(runId);
  p.expiredRuns.set(runId, { ...event.data, expiredAt: event.time, seq });
}

function initialOf(kind: AggregateKind, event: SonarEvent): [AnySnapshot, ActionNames] {
  switch (event.type) {
    case 'TaskCreated':
      // Same state as initialTransition (Pending has no entry actions; the unit and replay
      // tests compare both), at a fraction of the cost: tasks are most of a bulk log.
      return [{ value: 'Pending', context: initialTaskContext(event), status: 'active' }, []];
    case 'StepCreated':
      return machines.step.initial(event);
    case 'RunSubmitted':
      return machines.run.initial(event);
    case 'WorkerJoined':
      return machines.worker.initial(event);
    case 'ScheduleCreated':
      return machines.schedule.initial(event);
    default:
      throw new IllegalTransitionError(kind, 'none', event.type);
  }
}

function nextOf(
  kind: AggregateKind,
  snapshot: AnySnapshot,
  event: SonarEvent,
): [AnySnapshot, ActionNames] | null {
  switch (kind) {
    case 'task':
      return machines.task.next(snapshot as TaskSnapshot, event as TaskEvent);
    case 'step':
      return machines.step.next(snapshot as StepSnapshot, event as StepEvent);
    case 'run':
      return machines.run.next(snapshot as RunSnapshot, event as RunEvent);
    case 'worker':
      return machines.worker.next(snapshot as WorkerSnapshot, event as WorkerEvent);
    case 'schedule':
      return machines.schedule.next(snapshot as ScheduleSnapshot, event as ScheduleEvent);
    case 'system':
      return null;
  }
}

/** Open: not terminal (Poisoned included: an operator may still move it). */
export const isOpenTaskState = (state: string): state is OpenTaskState =>
  (OPEN_TASK_STATES as readonly string[]).includes(state);

/**
 * Applies one decoded event at stream sequence `seq`. Throws IllegalTransitionError when the
 * machine refuses it; the projection is then unchanged.
 */
export function applyDecoded(
  p: Projection,
  ref: AggregateRef,
  event: SonarEvent,
  seq: number,
): Applied {
  const { next, from, to, actions, entry } = evaluate(p, ref, event);
  if (seq > p.lastSeq) p.lastSeq = seq;
  if (ref.kind === 'system') {
    if (event.type === 'ReconcilerElected') {
      const { nodeId, honors, tagRates } = event.data;
      p.leader = {
        nodeId,
        time: event.time,
        seq,
        ...(honors && { honors }),
        ...(tagRates !== undefined && { tagRates }),
      };
    }
    return { ok: true, ref, event, from, to, actions };
  }
  if (event.type === 'RunExpired') {
    evictRun(p, event, seq);
    return { ok: true, ref, event, from, to, actions };
  }
  if (event.type === 'WorkerExpired') {
    p.workers.delete(ref.key);
    p.workersInService.delete(ref.key);
    return { ok: true, ref, event, from, to, actions };
  }
  if (entry) {
    entry.snapshot = next!;
    entry.seq = seq;
  } else {
    tableOf(p, ref.kind)!.set(ref.key, { snapshot: next!, seq });
  }
  if (ref.kind === 'task') {
    const spec = (next as TaskSnapshot).context.spec;
    const stepKey = `${spec.runId}.${spec.stepId}`;
    const index = stepIndexOf(p, stepKey);
    if (from === null && event.type === 'TaskCreated') {
      const list = p.stepTasks.get(stepKey);
      if (list) list.push(ref.key);
      else p.stepTasks.set(stepKey, [ref.key]);
      index.order.set(ref.key, list ? list.length - 1 : 0);
    }
    if (event.type === 'TaskPublished') notePublish(p, event.data.tag, Date.parse(event.time));
    if (from !== to) {
      if (from !== null && isOpenTaskState(from)) p.tasksByState[from].delete(ref.key);
      if (isOpenTaskState(to)) p.tasksByState[to].add(ref.key);
      const context = (next as TaskSnapshot).context;
      indexTaskMove(index, ref.key, context, from as TaskState | null, to as TaskState);
      markStepActivity(p, stepKey, index);
    }
  } else if (ref.kind === 'step') {
    markStepActivity(p, ref.key, stepIndexOf(p, ref.key));
  } else if (ref.kind === 'run') {
    if (next!.status === 'active') p.activeRuns.add(ref.key);
    else p.activeRuns.delete(ref.key);
  } else if (ref.kind === 'worker') {
    if (next!.status === 'active') p.workersInService.add(ref.key);
    else p.workersInService.delete(ref.key);
  }
  return { ok: true, ref, event, from, to, actions };
}

/** Times kept past the bound before trimming: trims are rare, so a publish costs O(1). */
const TRIM_SLACK = 1024;

/** Files one publish time under its tag, keeping the list ascending and bounded. */
function notePublish(p: Projection, tag: string, at: number): void {
  if (Number.isNaN(at)) return;
  let times = p.publishTimes.get(tag);
  if (!times) p.publishTimes.set(tag, (times = []));
  let i = times.length;
  // Server times follow stream order, but may step back a little when the stream's leader moves.
  while (i > 0 && times[i - 1]! > at) i--;
  if (i === times.length) times.push(at);
  else times.splice(i, 0, at);
  const newest = times[times.length - 1]!;
  if (times.length > RATE_HISTORY + TRIM_SLACK) times.splice(0, times.length - RATE_HISTORY);
  else if (times[0]! < newest - MAX_RATE_WINDOW_MS - 60_000) {
    let cut = 0;
    while (times[cut]! < newest - MAX_RATE_WINDOW_MS) cut++;
    times.splice(0, cut);
  }
}

function stepIndexOf(p: Projection, stepKey: string): StepIndex {
  let index = p.stepIndex.get(stepKey);
  if (!index) {
    index = {
      counts: {
        Pending: 0,
        Published: 0,
        Running: 0,
        Finalizing: 0,
        Succeeded: 0,
        Failed: 0,
        Dead: 0,
        Cancelled: 0,
        Poisoned: 0,
      },
      order: new Map(),
      fresh: new Set(),
      returned: new Set(),
      pendingTags: new Map(),
      lanes: new Map(),
      timed: new TimedTasks(),
    };
    p.stepIndex.set(stepKey, index);
  }
  return index;
}

function indexTaskMove(
  index: StepIndex,
  key: string,
  context: TaskContext,
  from: TaskState | null,
  to: TaskState,
): void {
  const tags = context.spec.tags;
  if (from !== null) index.counts[from]--;
  index.counts[to]++;
  if (from === 'Pending') {
    if (index.fresh.delete(key)) unfileFresh(index, key, context.spec.priority);
    else index.returned.delete(key);
    for (const tag of tags) {
      const n = (index.pendingTags.get(tag) ?? 1) - 1;
      if (n > 0) index.pendingTags.set(tag, n);
      else index.pendingTags.delete(tag);
    }
  }
  if (to === 'Pending') {
    // Only TaskCreated enters `fresh`, so its insertion order is the creation order.
    if (from === null) indexFresh(index, key, context);
    else index.returned.add(key);
    for (const tag of tags) index.pendingTags.set(tag, (index.pendingTags.get(tag) ?? 0) + 1);
  }
}

/**
 * Files a never-published Pending task; also how a restored snapshot rebuilds `lanes` and
 * `timed` from `fresh`, which it walks in creation order, the order both keep.
 */
export function indexFresh(index: StepIndex, key: string, context: TaskContext): void {
  index.fresh.add(key);
  const priority = context.spec.priority;
  // A fresh task's retryAt is still its resolved notBefore: only an attempt changes it.
  if (context.retryAt !== null) index.timed.add(key, priority, Date.parse(context.retryAt));
  else {
    const lane = index.lanes.get(priority);
    if (lane) lane.add(key);
    else index.lanes.set(priority, new Set([key]));
  }
}

/** Takes a task that left `fresh` out of its lane, or out of `timed`. */
function unfileFresh(index: StepIndex, key: string, priority: number | undefined): void {
  const lane = index.lanes.get(priority);
  if (lane?.delete(key)) {
    if (lane.size === 0) index.lanes.delete(priority);
  } else index.timed.delete(key, priority);
}

/**
 * A step is active while it is unfinished or any of its tasks is not terminal (a Skipped step
 * whose Pending tasks are still to be cancelled, a Poisoned task retried in a finished step).
 * Only a created step is listed, so the Set keeps `StepCreated` order for unfinished steps.
 */
function markStepActivity(p: Projection, stepKey: string, index: StepIndex): void {
  const step = p.steps.get(stepKey);
  if (!step) return;
  const c = index.counts;
  const unfinishedTasks = c.Pending + c.Published + c.Running + c.Finalizing + c.Poisoned;
  if (step.snapshot.status === 'active' || unfinishedTasks > 0) p.activeSteps.add(stepKey);
  else p.activeSteps.delete(stepKey);
}

/**
 * Decodes and applies one stored record. Never throws: a record that cannot be decoded or
 * that the machine refuses comes back as `{ ok: false, reason }` for replay to count.
 */
export function applyEvent(p: Projection, record: EventRecord): ApplyOutcome {
  // A refused event still moves the read position: the live loop resumes after it.
  if (record.seq > p.lastSeq) p.lastSeq = record.seq;
  if (record.decodeError !== undefined) return { ok: false, reason: record.decodeError };
  const ref = parseEventSubject(record.subject);
  if (!ref) return { ok: false, reason: `not an event subject: ${JSON.stringify(record.subject)}` };
  let event: SonarEvent;
  if (record.validated === true) {
    event = { type: record.type, data: record.data, time: record.time } as SonarEvent;
  } else {
    const decoded = decodeEvent(record.type, record.data, record.time, record.v);
    if (!decoded.ok) return { ok: false, reason: decoded.error.message };
    event = decoded.value;
  }
  try {
    return applyDecoded(p, ref, event, record.seq);
  } catch (err: unknown) {
    if (err instanceof IllegalTransitionError) return { ok: false, reason: err.message };
    throw err;
  }
}
