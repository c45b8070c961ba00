import type { Projection } from '../../actors/projection.js';
import { isSettledTaskState, TASK_STATES } from '../../actors/task/task.machine.js';
import type { TaskState } from '../../actors/task/task.machine.js';
import { paint } from './output.js';

/** One step of a run as a progress display shows it. */
export interface StepProgress {
  stepId: string;
  state: string;
  starved: boolean;
  /** Tasks the step announced (`taskCount`). */
  total: number;
  /** Settled tasks: terminal, or held Poisoned. */
  done: number;
  counts: Record<TaskState, number>;
}

const SETTLED: readonly TaskState[] = TASK_STATES.filter(isSettledTaskState);

/** The run's steps in run-file order (creation order while the run is not yet whole). */
export function stepProgress(p: Projection, runId: string): StepProgress[] {
  const ids =
    p.runs.get(runId)?.snapshot.context.stepIds ??
    [...p.steps.keys()]
      .filter((k) => k.startsWith(`${runId}.`))
      .map((k) => k.slice(runId.length + 1));
  const out: StepProgress[] = [];
  for (const stepId of ids) {
    const step = p.steps.get(`${runId}.${stepId}`)?.snapshot;
    const counts = p.stepIndex.get(`${runId}.${stepId}`)?.counts;
    if (!step || !counts) continue;
    out.push({
      stepId,
      state: step.value,
      starved: step.context.starved,
      total: step.context.taskCount,
      done: SETTLED.reduce((n, s) => n + counts[s], 0),
      counts: { ...counts },
    });
  }
  return out;
}

/** `[#######.........]`, `width` cells. */
export function bar(done: number, total: number, width = 20): string {
  const filled = total === 0 ? width : Math.round((done / total) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

/** `3m05s`, `12s`, `-` for unknown. */
export function shortDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '-';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** Short names for the per-state counts; only states with tasks are shown. */
const SHOWN: [TaskState, string][] = [
  ['Pending', 'pending'],
  ['Published', 'queued'],
  ['Running', 'running'],
  ['Finalizing', 'finalizing'],
  ['Succeeded', 'ok'],
  ['Failed', 'failed'],
  ['Dead', 'dead'],
  ['Cancelled', 'cancelled'],
  ['Poisoned', 'poisoned'],
];

/** `running 2 · ok 4`: the step's tasks by state, zero counts left out. */
export function stateCounts(counts: Record<TaskState, number>, color: boolean): string {
  const parts: string[] = [];
  for (const [state, label] of SHOWN) {
    const n = counts[state];
    if (n === 0) continue;
    const text = `${label} ${n}`;
    parts.push(
      state === 'Succeeded'
        ? paint(color, 'green', text)
        : state === 'Failed' || state === 'Dead' || state === 'Poisoned'
          ? paint(color, 'red', text)
          : state === 'Running'
            ? paint(color, 'cyan', text)
            : text,
    );
  }
  return parts.join(' · ');
}

/** Step state, colored. */
export function stepState(state: string, starved: boolean, color: boolean): string {
  const text = starved ? `${state} (starved)` : state;
  if (state === 'Succeeded') return paint(color, 'green', text);
  if (state === 'Failed' || state === 'Blocked') return paint(color, 'red', text);
  if (state === 'Skipped' || starved) return paint(color, 'yellow', text);
  return text;
}

/** Per-step rates for a progress bar: tasks settled per second since the watch began. */
export class RateTracker {
  private readonly first = new Map<string, { done: number; at: number }>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Tasks per second, or null until the step has moved. */
  rate(stepId: string, done: number): number | null {
    const now = this.now();
    const first = this.first.get(stepId);
    if (!first) {
      this.first.set(stepId, { done, at: now });
      return null;
    }
    const seconds = (now - first.at) / 1000;
    const moved = done - first.done;
    return seconds > 0 && moved > 0 ? moved / seconds : null;
  }
}

/** One line per step: bar, done/total, rate, ETA, state, tasks by state. */
export function progressLines(
  steps: readonly StepProgress[],
  rates: RateTracker,
  color: boolean,
): string[] {
  const width = Math.max(4, ...steps.map((s) => s.stepId.length));
  return steps.map((s) => {
    const perSecond = rates.rate(s.stepId, s.done);
    const left = s.total - s.done;
    const eta =
      left === 0 ? 'done' : perSecond ? `ETA ${shortDuration((left / perSecond) * 1000)}` : 'ETA -';
    const rate = perSecond ? `${perSecond.toFixed(1)}/s` : '-/s';
    return [
      `  ${s.stepId.padEnd(width)}`,
      bar(s.done, s.total),
      `${s.done}/${s.total}`.padStart(9),
      rate.padStart(7),
      eta.padEnd(9),
      stepState(s.state, s.starved, color),
      stateCounts(s.counts, color),
    ].join('  ');
  });
}
