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
import type { ReplayView } from '../../actors/replay-view.js';
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

interface Folded {
  tasks: Map<string, TaskSnap>;
  steps: Map<string, StepSnap>;
  runs: Map<string, RunSnap>;
  workers: Map<string, WorkerSnap>;
  leader: { nodeId: string; time: string; seq: number } | null;
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
    case 'system':
      return false;
  }
}

/** One event at `seq`: null when applied, else the reason it was refused. */
function applyOne(f: Folded, ref: AggregateRef, event: SonarEvent, seq: number): string | null {
  if (ref.kind === 'system') {
    if (event.type !== 'ReconcilerElected') return refuse('system', null, event.type);
    f.leader = { nodeId: event.data.nodeId, time: event.time, seq };
    return null;
  }
  const state = stateOf(f, ref);
  const created = createdKey(event);
  if (created) {
    if (created.kind !== ref.kind || created.key !== ref.key) {
      return refuse(ref.kind, `subject key ${ref.key}`, event.type);
    }
    if (state !== undefined) return refuse(ref.kind, state, event.type);
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
  for (const [key, snap] of f.workers) view.workers[key] = { state: String(snap.value) };
  return { view, leader: f.leader };
}
