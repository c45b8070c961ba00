import type {
  EventRecord,
  ExpiredRun,
  Projection,
  RunSnapshot,
} from '../../../../actors/projection.js';
import { DEFAULT_PRIORITY } from '../../../../actors/priority.js';
import { delayedTasks } from '../../../../actors/reconciler/delays.js';
import { TASK_STATES } from '../../../../actors/task/task.machine.js';
import type { TaskState } from '../../../../actors/task/task.machine.js';

export { TASK_STATES };

export type StateCounts = Record<TaskState, number>;

export interface RunSummary {
  runId: string;
  state: string;
  submittedAt: string;
  endedAt: string | null;
  reason: string | null;
  taskCount: number;
  counts: StateCounts;
  /** Succeeded tasks over the run's tasks, 0 to 1. */
  progress: number;
  /** When retention evicted the run (`RunExpired`): only this summary is left. Else null. */
  expiredAt: string | null;
  /** Of its Pending tasks, those a notBefore still holds back (their own count). */
  delayed: number;
}

export interface StepView {
  stepId: string;
  state: string;
  tags: string[];
  after: string[];
  maxConcurrent: number | null;
  taskCount: number;
  starved: boolean;
  reason: string | null;
  counts: StateCounts;
  /** Of its Pending tasks, those a notBefore still holds back (their own count). */
  delayed: number;
  /** Its tasks' priority, unless a task has its own. */
  priority: number;
  progress: number;
  /** Longest chain of `after` edges above it: its column in the DAG. */
  depth: number;
  /** The step's own events, oldest first: its timeline. */
  timeline: { type: string; time: string }[];
  /** The first `limit` tasks, in creation order. */
  tasks: { taskId: string; state: string; attempt: number; workerId: string | null }[];
  /** Tasks not listed in `tasks`. */
  moreTasks: number;
}

export interface RunDetail extends RunSummary {
  steps: StepView[];
}

const zeroCounts = (): StateCounts =>
  Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as StateCounts;

function stepCounts(p: Projection, stepKey: string): StateCounts {
  return { ...zeroCounts(), ...p.stepIndex.get(stepKey)?.counts };
}

function summaryOf(p: Projection, run: RunSnapshot, now: number): RunSummary {
  const c = run.context;
  const counts = zeroCounts();
  let delayed = 0;
  for (const stepId of c.stepIds) {
    const sc = p.stepIndex.get(`${c.runId}.${stepId}`)?.counts;
    if (sc) for (const s of TASK_STATES) counts[s] += sc[s];
    if (sc && sc.Pending > 0) delayed += delayedTasks(p, `${c.runId}.${stepId}`, now);
  }
  return {
    runId: c.runId,
    state: run.value,
    submittedAt: c.submittedAt,
    endedAt: c.endedAt,
    reason: c.reason,
    taskCount: c.taskCount,
    counts,
    progress: c.taskCount === 0 ? 1 : counts.Succeeded / c.taskCount,
    expiredAt: null,
    delayed,
  };
}

function expiredSummaryOf(run: ExpiredRun): RunSummary {
  const counts = { ...zeroCounts(), ...run.tasks };
  return {
    runId: run.runId,
    state: run.state,
    submittedAt: run.submittedAt,
    endedAt: run.endedAt,
    reason: run.reason,
    taskCount: run.taskCount,
    counts,
    progress: run.taskCount === 0 ? 1 : counts.Succeeded / run.taskCount,
    expiredAt: run.expiredAt,
    delayed: 0,
  };
}

/**
 * Runs, expired ones included, newest first (by `RunSubmitted` time), at most `limit`;
 * delayed tasks counted at `now`.
 */
export function buildRunList(p: Projection, limit: number, now: number): RunSummary[] {
  const runs = [
    ...[...p.runs.values()].map((r) => summaryOf(p, r.snapshot, now)),
    ...[...p.expiredRuns.values()].map(expiredSummaryOf),
  ];
  runs.sort((a, b) => (a.submittedAt < b.submittedAt ? 1 : -1));
  return runs.slice(0, limit);
}

/**
 * One run with its steps: states and counts from the projection, timelines from the steps'
 * own events (`stepEvents`: the records of `<prefix>.events.step.<runId>.*`). Null when the
 * run is unknown.
 */
export function buildRunDetail(
  p: Projection,
  runId: string,
  stepEvents: readonly EventRecord[],
  taskLimit: number,
  now: number,
): RunDetail | null {
  const expired = p.expiredRuns.get(runId);
  if (expired) return { ...expiredSummaryOf(expired), steps: [] };
  const run = p.runs.get(runId)?.snapshot;
  if (!run) return null;
  const timelines = new Map<string, { type: string; time: string }[]>();
  for (const r of stepEvents) {
    const stepId = r.subject.split('.')[4];
    if (stepId === undefined || typeof r.type !== 'string') continue;
    const list = timelines.get(stepId) ?? [];
    list.push({ type: r.type, time: r.time });
    timelines.set(stepId, list);
  }
  const depths = depthsOf(
    run.context.stepIds.map((id) => ({
      id,
      after: p.steps.get(`${runId}.${id}`)?.snapshot.context.after ?? [],
    })),
  );
  const steps = run.context.stepIds.map((stepId): StepView => {
    const key = `${runId}.${stepId}`;
    const step = p.steps.get(key)?.snapshot;
    const counts = stepCounts(p, key);
    const taskKeys = p.stepTasks.get(key) ?? [];
    const taskCount = step?.context.taskCount ?? taskKeys.length;
    return {
      stepId,
      state: step?.value ?? 'Unknown',
      tags: step?.context.tags ?? [],
      after: step?.context.after ?? [],
      maxConcurrent: step?.context.maxConcurrent ?? null,
      taskCount,
      starved: step?.context.starved ?? false,
      reason: step?.context.reason ?? null,
      counts,
      delayed: counts.Pending > 0 ? delayedTasks(p, key, now) : 0,
      priority: step?.context.priority ?? DEFAULT_PRIORITY,
      progress: taskCount === 0 ? 1 : counts.Succeeded / taskCount,
      depth: depths.get(stepId) ?? 0,
      timeline: timelines.get(stepId) ?? [],
      tasks: taskKeys.slice(0, taskLimit).map((k) => {
        const t = p.tasks.get(k)!.snapshot;
        return {
          taskId: t.context.spec.taskId,
          state: t.value,
          attempt: t.context.attempt,
          workerId: t.context.workerId,
        };
      }),
      moreTasks: Math.max(0, taskKeys.length - taskLimit),
    };
  });
  return { ...summaryOf(p, run, now), steps };
}

/**
 * Each step's longest path from a root along `after` edges (submit refuses cycles). A
 * depth-first walk on an explicit stack: a run may chain thousands of steps.
 */
export function depthsOf(steps: readonly { id: string; after: readonly string[] }[]) {
  const after = new Map(steps.map((s) => [s.id, s.after]));
  const depth = new Map<string, number>();
  const trail = new Set<string>();
  for (const s of steps) {
    if (depth.has(s.id)) continue;
    const frames = [{ id: s.id, next: 0 }];
    trail.add(s.id);
    while (frames.length > 0) {
      const top = frames[frames.length - 1]!;
      const deps = after.get(top.id) ?? [];
      if (top.next < deps.length) {
        const a = deps[top.next++]!;
        // A step on the trail closes a cycle: it counts as depth 0, never loop on a bad log.
        if (after.has(a) && !depth.has(a) && !trail.has(a)) {
          trail.add(a);
          frames.push({ id: a, next: 0 });
        }
        continue;
      }
      let d = 0;
      for (const a of deps) if (after.has(a)) d = Math.max(d, (depth.get(a) ?? 0) + 1);
      depth.set(top.id, d);
      trail.delete(top.id);
      frames.pop();
    }
  }
  return depth;
}
