/**
 * A slow reference fold of an event log: the same `sonar replay --json` view as
 * `replay()` + `replayView()`, computed with nothing but XState's public `initialTransition`,
 * `transition` and `snapshot.can`. It shares only line parsing and event decoding with
 * actors/ (not projection.ts, not the transitioner), so a replay test that compares the two
 * proves the fast path (createTransitioner) folds exactly as `transition()` does.
 */
import { initialTransition, transition } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { IllegalTransitionError } from '../../actors/errors.js';
import { decodeEvent, parseEventSubject } from '../../actors/events.js';
import type { AggregateRef, SonarEvent } from '../../actors/events.js';
import { parseEventLine } from '../../actors/replay.js';
import type { Skipped } from '../../actors/replay.js';
import { withSchedules } from '../../actors/replay-view.js';
import type { ReplayView } from '../../actors/replay-view.js';
import { scheduleMachine } from '../../actors/schedule/schedule.machine.js';
import type { ScheduleEvent } from '../../actors/schedule/schedule.events.js';
import { scheduleView } from '../../actors/schedule/schedule-view.js';
import { runMachine } from '../../actors/run/run.machine.js';
import type { RunEvent } from '../../actors/run/run.events.js';
import { stepMachine } from '../../actors/step/step.machine.js';
import type { StepEvent } from '../../actors/step/step.events.js';
import { taskMachine } from '../../actors/task/task.machine.js';
import type { TaskEvent } from '../../actors/task/task.events.js';
import { workerMachine } from '../../actors/worker/worker.machine.js';
import type { WorkerEvent } from '../../actors/worker/worker.events.js';

type TaskSnap = SnapshotFrom<typeof taskMachine>;
type StepSnap = SnapshotFrom<typeof stepMachine>;
type RunSnap = SnapshotFrom<typeof runMachine>;
type WorkerSnap = SnapshotFrom<typeof workerMachine>;
type ScheduleSnap = SnapshotFrom<typeof scheduleMachine>;

interface Folded {
  tasks: Map<string, TaskSnap>;
  steps: Map<string, StepSnap>;
  runs: Map<string, RunSnap>;
  workers: Map<string, WorkerSnap>;
  schedules: Map<string, ScheduleSnap>;
  /** Final states of the runs `RunExpired` evicted. */
  expired: Map<string, string>;
  leader: {
    nodeId: string;
    time: string;
    seq: number;
    honors?: string[];
    tagRates?: string;
  } | null;
}

export interface ReferenceResult {
  view: ReplayView;
  leader: Folded['leader'];
}

const refuse = (machine: string, state: unknown, type: string): string =>
  new IllegalTransitionError(machine, state, type).message;

/** The aggregate a creation event names in its own data, or null for other events. */
function createdKey(event: SonarEvent): { kind: AggregateRef['kind']; key: string } | null {
  switch (event.type) {
    case 'TaskCreated':
      return { kind: 'task', key: `${event.data.runId}.${event.data.taskId}` };
    case 'StepCreated':
      return { kind: 'step', key: `${event.data.runId}.${event.data.stepId}` };
    case 'RunSubmitted':
      return { kind: 'run', key: event.data.runId };
    case 'WorkerJoined':
      return { kind: 'worker', key: event.data.workerId };
    case 'ScheduleCreated':
      return { kind: 'schedule', key: event.data.name };
    default:
      return null;
  }
}

/** Creates the aggregate from its creation event (already checked against the subject). */
function create(f: Folded, key: string, event: SonarEvent): void {
  switch (event.type) {
    case 'TaskCreated':
      f.tasks.set(key, initialTransition(taskMachine, event)[0]);
      return;
    case 'StepCreated':
      f.steps.set(key, initialTransition(stepMachine, event)[0]);
      return;
    case 'RunSubmitted':
      f.runs.set(key, initialTransition(runMachine, event)[0]);
      return;
    case 'WorkerJoined':
      f.workers.set(key, initialTransition(workerMachine, event)[0]);
      return;
    case 'ScheduleCreated':
      f.schedules.set(key, initialTransition(scheduleMachine, event)[0]);
      return;
    default:
      throw new Error(`${event.type} is not a creation event`);
  }
}

/** The current state of an aggregate, or undefined when it does not exist. */
function stateOf(f: Folded, ref: AggregateRef): unknown {
  switch (ref.kind) {
    case 'task':
      return f.tasks.get(ref.key)?.value;
    case 'step':
      return f.steps.get(ref.key)?.value;
    case 'run':
      return f.runs.get(ref.key)?.value;
    case 'worker':
      return f.workers.get(ref.key)?.value;
    case 'schedule':
      return f.schedules.get(ref.key)?.value;
    case 'system':
      return undefined;
  }
}

/** Moves an existing aggregate with the public `transition()`; false when `can()` refuses. */
function advance(f: Folded, ref: AggregateRef, event: SonarEvent): boolean {
  switch (ref.kind) {
    case 'task': {
      const snap = f.tasks.get(ref.key)!;
      const ev = event as TaskEvent;
      if (!snap.can(ev)) return false;
      f.tasks.set(ref.key, transition(taskMachine, snap, ev)[0]);
      return true;
    }
    case 'step': {
      const snap = f.steps.get(ref.key)!;
      const ev = event as StepEvent;
      if (!snap.can(ev)) return false;
      f.steps.set(ref.key, transition(stepMachine, snap, ev)[0]);
      return true;
    }
    case 'run': {
      const snap = f.runs.get(ref.key)!;
      const ev = event as RunEvent;
      if (!snap.can(ev)) return false;
      f.runs.set(ref.key, transition(runMachine, snap, ev)[0]);
      return true;
    }
    case 'worker': {
      const snap = f.workers.get(ref.key)!;
      const ev = event as WorkerEvent;
      if (!snap.can(ev)) return false;
      f.workers.set(ref.key, transition(workerMachine, snap, ev)[0]);
      return true;
    }
    case 'schedule': {
      const snap = f.schedules.get(ref.key)!;
      const ev = event as ScheduleEvent;
      if (!snap.can(ev)) return false;
      f.schedules.set(ref.key, transition(scheduleMachine, snap, ev)[0]);
      return true;
    }
    case 'system':
      return false;
  }
}

const OPEN_TASK_STATES = ['Pending', 'Published', 'Running', 'Finalizing', 'Poisoned'];

/**
 * The retention events, written from DESIGN.md and docs/contract.md, not from
 * projection.ts: a run expires once finished with no task open, with its own final state,
 * and is then forgotten but for its state; a worker expires once Left or Lost.
 */
function expire(f: Folded, ref: AggregateRef, event: SonarEvent): string | null {
  if (event.type === 'WorkerExpired') {
    if (ref.kind !== 'worker') return refuse(ref.kind, `subject key ${ref.key}`, event.type);
    const worker = f.workers.get(ref.key);
    if (!worker) return refuse('worker', 'none', event.type);
    if (worker.status !== 'done') return refuse('worker', worker.value, event.type);
    f.workers.delete(ref.key);
    return null;
  }
  if (event.type !== 'RunExpired') throw new Error(`${event.type} is not a retention event`);
  if (ref.kind !== 'run' || event.data.runId !== ref.key) {
    return refuse(ref.kind, `subject key ${ref.key}`, event.type);
  }
  if (f.expired.has(ref.key)) return refuse('run', 'Expired', event.type);
  const run = f.runs.get(ref.key);
  if (run) {
    if (run.status !== 'done' || run.value !== event.data.state) {
      return refuse('run', run.value, event.type);
    }
    const stepIds = new Set(run.context.stepIds);
    const ofRun = (spec: { runId: string; stepId: string }) =>
      spec.runId === ref.key && stepIds.has(spec.stepId);
    const open = [...stepIds].some((stepId) => {
      const step = f.steps.get(`${ref.key}.${stepId}`);
      if (!step) return false;
      if (step.status !== 'done') return true;
      return [...f.tasks.values()].some(
        (t) =>
          t.context.spec.stepId === stepId &&
          ofRun(t.context.spec) &&
          OPEN_TASK_STATES.includes(String(t.value)),
      );
    });
    if (open) return refuse('run', `${String(run.value)} with open tasks`, event.type);
    for (const [key, t] of f.tasks) if (ofRun(t.context.spec)) f.tasks.delete(key);
    for (const stepId of stepIds) f.steps.delete(`${ref.key}.${stepId}`);
    f.runs.delete(ref.key);
  }
  f.expired.set(ref.key, event.data.state);
  return null;
}

/** One event at `seq`: null when applied, else the reason it was refused. */
function applyOne(f: Folded, ref: AggregateRef, event: SonarEvent, seq: number): string | null {
  if (ref.kind === 'system') {
    if (event.type !== 'ReconcilerElected') return refuse('system', null, event.type);
    const { nodeId, honors, tagRates } = event.data;
    f.leader = {
      nodeId,
      time: event.time,
      seq,
      ...(honors && { honors }),
      ...(tagRates !== undefined && { tagRates }),
    };
    return null;
  }
  if (event.type === 'RunExpired' || event.type === 'WorkerExpired') return expire(f, ref, event);
  const state = stateOf(f, ref);
  const created = createdKey(event);
  if (created) {
    if (created.kind !== ref.kind || created.key !== ref.key) {
      return refuse(ref.kind, `subject key ${ref.key}`, event.type);
    }
    if (state !== undefined) return refuse(ref.kind, state, event.type);
    const runId = ref.key.split('.')[0]!;
    if (ref.kind !== 'worker' && ref.kind !== 'schedule' && f.expired.has(runId)) {
      return refuse(ref.kind, 'Expired', event.type);
    }
    create(f, ref.key, event);
    return null;
  }
  if (state === undefined) return refuse(ref.kind, 'none', event.type);
  return advance(f, ref, event) ? null : refuse(ref.kind, state, event.type);
}

/** The `sonar replay --json` view of JSONL lines, folded with the public `transition()`. */
export function referenceFold(lines: Iterable<string>): ReplayView {
  return referenceReplay(lines).view;
}

/** Folds JSONL lines in file order, as `sonar replay --json` does (DESIGN.md section 8). */
export function referenceReplay(lines: Iterable<string>): ReferenceResult {
  const f: Folded = {
    tasks: new Map(),
    steps: new Map(),
    runs: new Map(),
    workers: new Map(),
    schedules: new Map(),
    expired: new Map(),
    leader: null,
  };
  const skipped: Skipped[] = [];
  let lineNo = 0;
  for (const text of lines) {
    lineNo++;
    if (text.trim() === '') continue;
    const record = parseEventLine(text, lineNo);
    if ('reason' in record) {
      skipped.push(record);
      continue;
    }
    const ref = parseEventSubject(record.subject);
    if (!ref) {
      skipped.push({
        seq: record.seq,
        reason: `not an event subject: ${JSON.stringify(record.subject)}`,
      });
      continue;
    }
    const decoded = decodeEvent(record.type, record.data, record.time, record.v);
    if (!decoded.ok) {
      skipped.push({ seq: record.seq, reason: decoded.error.message });
      continue;
    }
    const refused = applyOne(f, ref, decoded.value, record.seq);
    if (refused !== null) skipped.push({ seq: record.seq, reason: refused });
  }

  const view: ReplayView = { tasks: {}, steps: {}, runs: {}, workers: {}, skipped };
  for (const [key, snap] of f.tasks) {
    const c = snap.context;
    view.tasks[key] = {
      state: String(snap.value),
      attempt: c.attempt,
      attemptId: c.attemptId,
      tag: c.tag,
      workerId: c.workerId,
      recoveries: c.recoveries,
    };
  }
  for (const [key, snap] of f.steps) {
    view.steps[key] = { state: String(snap.value), starved: snap.context.starved };
  }
  for (const [key, snap] of f.runs) view.runs[key] = { state: String(snap.value) };
  for (const [key, state] of f.expired) view.runs[key] = { state, expired: true };
  for (const [key, snap] of f.workers) view.workers[key] = { state: String(snap.value) };
  const schedules = [...f.schedules].map(
    ([name, snap]) => [name, scheduleView(snap.value, snap.context)] as const,
  );
  return { view: withSchedules(view, schedules), leader: f.leader };
}
