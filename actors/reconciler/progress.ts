import type { Aggregate, Projection, RunSnapshot, StepIndex, StepSnapshot } from '../projection.js';
import { FAILED_TASK_STATES, TERMINAL_TASK_STATES } from '../task/task.machine.js';
import { reconcilerEvent } from './decisions.js';
import type { ReconcilerEvent } from './decisions.js';

/** `<runId>.<id>` -> `<id>` (ids never hold a dot). */
const idOf = (key: string): string => key.slice(key.indexOf('.') + 1);

/** The step's tasks in these states, in creation order, as ids (a one-off walk at an outcome). */
function taskIdsIn(p: Projection, stepKey: string, states: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const key of p.stepTasks.get(stepKey) ?? []) {
    if (states.has(p.tasks.get(key)!.snapshot.value)) out.push(idOf(key));
  }
  return out;
}

const POISONED = new Set(['Poisoned']);

/** Task tallies of a step; `settled` once every task it announced exists and is settled. */
function tally(step: StepSnapshot, index: StepIndex | undefined) {
  const c = index?.counts;
  const succeeded = c?.Succeeded ?? 0;
  const bad = c ? c.Failed + c.Dead + c.Cancelled : 0;
  const poisoned = c?.Poisoned ?? 0;
  const total = c ? Object.values(c).reduce((a, b) => a + b, 0) : 0;
  const complete = total >= step.context.taskCount;
  return {
    succeeded,
    bad,
    poisoned,
    total,
    settled: complete && succeeded + bad + poisoned === total,
  };
}

function failure(p: Projection, key: string, seq: number): ReconcilerEvent {
  const taskIds = taskIdsIn(p, key, FAILED_TASK_STATES);
  const first = taskIds[0]!;
  const state = p.tasks.get(`${key.slice(0, key.indexOf('.'))}.${first}`)!.snapshot.value;
  const what = `task ${first} ${state === 'Dead' ? 'died' : state.toLowerCase()}`;
  const reason = taskIds.length === 1 ? what : `${taskIds.length} tasks did not succeed (${what})`;
  return reconcilerEvent({ kind: 'step', key }, 'StepFailed', { reason, taskIds }, seq);
}

/** Waiting: Ready once every `after` step Succeeded; Skipped once one of them failed or was skipped. */
function judgeWaiting(p: Projection, key: string, step: Aggregate<StepSnapshot>) {
  const { runId, after } = step.snapshot.context;
  let allSucceeded = true;
  for (const id of after) {
    const before = p.steps.get(`${runId}.${id}`)?.snapshot;
    if (before?.value === 'Failed' || before?.value === 'Skipped') {
      // The root cause travels down the chain: `step build failed` for every later step.
      const reason =
        before.value === 'Failed'
          ? `step ${id} failed`
          : (before.context.reason ?? `step ${id} skipped`);
      return reconcilerEvent({ kind: 'step', key }, 'StepSkipped', { reason }, step.seq);
    }
    if (before?.value !== 'Succeeded') allSucceeded = false;
  }
  return allSucceeded ? reconcilerEvent({ kind: 'step', key }, 'StepReady', {}, step.seq) : null;
}

/**
 * Ready: Succeeded when every task Succeeded; once every task is settled, Failed if one
 * Failed, died or was Cancelled, else Blocked (only Poisoned tasks are left unfinished).
 */
function judgeReady(p: Projection, key: string, step: Aggregate<StepSnapshot>) {
  const t = tally(step.snapshot, p.stepIndex.get(key));
  if (!t.settled) return null;
  if (t.succeeded === t.total) {
    return reconcilerEvent({ kind: 'step', key }, 'StepSucceeded', {}, step.seq);
  }
  if (t.bad > 0) return failure(p, key, step.seq);
  const taskIds = taskIdsIn(p, key, POISONED);
  return reconcilerEvent({ kind: 'step', key }, 'StepBlocked', { taskIds }, step.seq);
}

/** Blocked: Failed when a Poisoned task was cancelled; Ready again when one was retried. */
function judgeBlocked(p: Projection, key: string, step: Aggregate<StepSnapshot>) {
  const t = tally(step.snapshot, p.stepIndex.get(key));
  if (t.settled && t.bad > 0) return failure(p, key, step.seq);
  if (t.settled && t.poisoned > 0) return null;
  return reconcilerEvent({ kind: 'step', key }, 'StepReady', {}, step.seq);
}

/** Cancels the tasks not yet terminal of a Skipped step (Pending ones, in practice). */
function cancelTasksOf(p: Projection, key: string, reason: string, out: ReconcilerEvent[]): void {
  for (const taskKey of p.stepTasks.get(key) ?? []) {
    const task = p.tasks.get(taskKey)!;
    if (TERMINAL_TASK_STATES.has(task.snapshot.value)) continue;
    out.push(
      reconcilerEvent({ kind: 'task', key: taskKey }, 'TaskCancelled', { reason }, task.seq),
    );
  }
}

/** A Running run ends once every step is finished: Succeeded if all Succeeded, else Failed. */
function judgeRun(p: Projection, runId: string, run: Aggregate<RunSnapshot>) {
  let firstBad: { id: string; state: string } | null = null;
  for (const id of run.snapshot.context.stepIds) {
    const step = p.steps.get(`${runId}.${id}`)?.snapshot;
    if (!step || step.status !== 'done') return null;
    if (step.value === 'Succeeded') continue;
    if (firstBad === null || (step.value === 'Failed' && firstBad.state !== 'Failed')) {
      firstBad = { id, state: step.value };
    }
  }
  if (firstBad === null)
    return reconcilerEvent({ kind: 'run', key: runId }, 'RunSucceeded', {}, run.seq);
  const reason = `step ${firstBad.id} ${firstBad.state.toLowerCase()}`;
  return reconcilerEvent({ kind: 'run', key: runId }, 'RunFailed', { reason }, run.seq);
}

/**
 * Step and run completion (DESIGN.md section 3), as the events task outcomes call for. Pure and
 * state-derived: each call judges the current projection, so applying its events and calling
 * again walks a chain (failed step, then the steps after it Skipped, then their tasks
 * Cancelled, then the run) to its end. A run not yet submitted is left alone; the unfinished
 * steps of a run that is no longer Running (a cut-short cancel) are Skipped. Reads only the
 * active steps and runs, plus one walk of a step's tasks when it reaches an outcome.
 */
export function progress(p: Projection): ReconcilerEvent[] {
  const out: ReconcilerEvent[] = [];
  for (const key of p.activeSteps) {
    const step = p.steps.get(key)!;
    const snap = step.snapshot;
    const run = p.runs.get(snap.context.runId)?.snapshot;
    if (!run) continue;
    if (snap.value === 'Skipped') {
      cancelTasksOf(p, key, snap.context.reason ?? 'step skipped', out);
      continue;
    }
    if (snap.status === 'done') continue;
    if (run.value !== 'Running') {
      const reason = `run ${run.value.toLowerCase()}`;
      out.push(reconcilerEvent({ kind: 'step', key }, 'StepSkipped', { reason }, step.seq));
      continue;
    }
    const event =
      snap.value === 'Waiting'
        ? judgeWaiting(p, key, step)
        : snap.value === 'Ready'
          ? judgeReady(p, key, step)
          : snap.value === 'Blocked'
            ? judgeBlocked(p, key, step)
            : null;
    if (event) out.push(event);
  }
  for (const runId of p.activeRuns) {
    const event = judgeRun(p, runId, p.runs.get(runId)!);
    if (event) out.push(event);
  }
  return out;
}
