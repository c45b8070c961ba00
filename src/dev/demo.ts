import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Projection } from '../../actors/projection.js';
import { isTerminalRunState } from '../../actors/run/run.machine.js';
import { LiveDisplay } from '../display/live-display.js';
import { paint } from '../display/output.js';
import {
  progressLines,
  RateTracker,
  shortDuration,
  stepProgress,
} from '../display/run-progress.js';
import { SonarClient } from '../client/client.js';
import { demoPace, demoRunFile } from './demo-run.js';
import type { DevStack } from './dev-stack.js';
import type { SupervisorEvent } from './supervisor.js';
import { ErrorCode, SonarError } from '../../actors/errors.js';

export interface DemoOptions {
  stack: DevStack;
  fast: boolean;
  /** Colors and in-place redraws (a terminal). */
  tty: boolean;
  /** Give up (exit 1) after this long. */
  timeoutMs: number;
}

export interface DemoSummary {
  runId: string;
  state: string;
  tasks: number;
  succeeded: number;
  /** Failed attempts that were retried. */
  retries: number;
  /** Tasks requeued because their worker was lost. */
  recoveries: number;
  elapsedMs: number;
  /** The worker the demo killed, and the task it held. */
  killed: { workerId: string; task: string } | null;
}

/** The workers as the display shows them: tags, slots, tasks running, state. */
function workerLines(p: Projection, color: boolean): string[] {
  const running = new Map<string, number>();
  for (const key of p.tasksByState.Running) {
    const w = p.tasks.get(key)!.snapshot.context.workerId;
    if (w !== null) running.set(w, (running.get(w) ?? 0) + 1);
  }
  const lines: string[] = [];
  for (const [id, { snapshot: w }] of p.workers) {
    if (w.value !== 'Active' && w.value !== 'Draining') continue;
    const n = running.get(id) ?? 0;
    lines.push(
      `  ${id.padEnd(24)}  ${w.context.tags.join(',').padEnd(9)}  slots ${w.context.slots}  ` +
        `${paint(color && n > 0, 'cyan', `running ${n}`)}  ${w.value === 'Active' ? 'active' : paint(color, 'yellow', 'draining')}`,
    );
  }
  return lines;
}

/**
 * `sonar dev --demo`: submits the demo run to the stack, shows its progress and the
 * workers live, SIGKILLs a worker while it runs a `process` task (halfway: once `fetch` is
 * done), narrates the recovery (the supervisor reports `sonar.api.exited`, the task is
 * requeued at once and runs again elsewhere), and returns a summary once the run ends.
 */
export async function runDemo(opts: DemoOptions): Promise<DemoSummary> {
  const { stack, tty } = opts;
  const ctx = stack.backend.ctx;
  const p = ctx.loop.projection;
  const color = tty;
  const display = new LiveDisplay({ tty, plainIntervalMs: opts.fast ? 1_000 : 2_000 });
  const started = performance.now();
  const runId = `demo-${Date.now().toString(36)}`;
  const markerDir = join(stack.logDir, '..', 'demo');
  await mkdir(markerDir, { recursive: true });
  const pace = demoPace(opts.fast);
  const elapsed = () => shortDuration(performance.now() - started);
  const say = (text: string) => display.note(`${paint(color, 'dim', `[${elapsed()}]`)} ${text}`);

  let retries = 0;
  let recoveries = 0;
  let killed: DemoSummary['killed'] = null;
  let killedAt = 0;
  const requeued = new Set<string>();
  const unsubscribe = ctx.loop.onApplied(({ event, ref }) => {
    if (ref.kind === 'worker' && event.type === 'WorkerLost' && event.data.reason === 'exited') {
      say(`backend: worker ${ref.key} Lost (exited); its tasks are requeued at once`);
    }
    if (ref.kind !== 'task' || !ref.key.startsWith(`${runId}.`)) return;
    const task = ref.key.slice(runId.length + 1);
    if (event.type === 'TaskAttemptFailed') {
      retries++;
      say(
        `task ${task} failed (exit ${event.data.exitCode}: ${event.data.error.trim().split('\n')[0]}); ` +
          `it is retried after a backoff`,
      );
    } else if (event.type === 'TaskRequeued' && event.data.reason === 'worker-lost') {
      recoveries++;
      requeued.add(task);
      const after = Math.round(performance.now() - killedAt);
      say(
        paint(color, 'yellow', `task ${task} requeued (worker-lost), ${after} ms after the kill`),
      );
    } else if (event.type === 'TaskStarted' && requeued.has(task)) {
      requeued.delete(task);
      say(paint(color, 'green', `task ${task} running again on worker ${event.data.workerId}`));
    }
  });
  const onSupervisor = (e: SupervisorEvent) => {
    if (e.type === 'reported' && e.outcome === 'reported') {
      say(`supervisor: sonar.api.exited sent for ${e.workerId}`);
    } else if (e.type === 'spawned' && killed !== null) {
      say(`supervisor: respawned a worker as ${e.workerId}`);
    }
  };
  const unsubscribeSupervisor = stack.supervisor.subscribe(onSupervisor);

  try {
    const client = new SonarClient(ctx.nc, { prefix: ctx.names.prefix });
    await waitFor(
      () => activeWorkers(p) >= stack.supervisor.children().length,
      30_000,
      'workers to join',
    );
    say(`${activeWorkers(p)} workers joined; submitting run ${runId}`);
    const file = demoRunFile(runId, join(markerDir, `${runId}.flaky`), pace);
    await client.submit(file);

    const rates = new RateTracker();
    const deadline = performance.now() + opts.timeoutMs;
    for (;;) {
      const run = p.runs.get(runId)?.snapshot.value;
      display.update([
        `${paint(color, 'dim', `[${elapsed()}]`)} run ${runId}: ${run ?? 'submitting'}`,
        ...progressLines(stepProgress(p, runId), rates, color),
        'workers:',
        ...workerLines(p, color),
      ]);
      if (run !== undefined && isTerminalRunState(run)) break;
      if (performance.now() > deadline) {
        say(
          paint(color, 'red', `the demo run did not end within ${shortDuration(opts.timeoutMs)}`),
        );
        break;
      }
      if (killed === null) {
        const victim = victimOf(p, runId, pace.processS * 300);
        if (victim) {
          if (stack.supervisor.kill(victim.workerId, 'SIGKILL')) {
            killed = victim;
            killedAt = performance.now();
            say(
              paint(
                color,
                'red',
                `SIGKILL worker ${victim.workerId} while it runs task ${victim.task}`,
              ),
            );
          }
        }
      }
      await delay(opts.fast ? 100 : 250);
    }
    display.finish();
    const run = p.runs.get(runId)?.snapshot.value ?? 'Unknown';
    const counts = stepProgress(p, runId).reduce(
      (acc, s) => ({ tasks: acc.tasks + s.total, ok: acc.ok + s.counts.Succeeded }),
      { tasks: 0, ok: 0 },
    );
    return {
      runId,
      state: run,
      tasks: counts.tasks,
      succeeded: counts.ok,
      retries,
      recoveries,
      elapsedMs: performance.now() - started,
      killed,
    };
  } finally {
    unsubscribe();
    unsubscribeSupervisor();
  }
}

const activeWorkers = (p: Projection): number =>
  [...p.workers.values()].filter((w) => w.snapshot.value === 'Active').length;

/** A `process` task running for at least `minRunMs` once `fetch` is done: halfway through. */
function victimOf(
  p: Projection,
  runId: string,
  minRunMs: number,
): { workerId: string; task: string } | null {
  if (p.steps.get(`${runId}.fetch`)?.snapshot.value !== 'Succeeded') return null;
  for (const key of p.tasksByState.Running) {
    const c = p.tasks.get(key)!.snapshot.context;
    if (c.spec.runId !== runId || c.spec.stepId !== 'process' || c.workerId === null) continue;
    if (c.since === null || Date.now() - Date.parse(c.since) < minRunMs) continue;
    return { workerId: c.workerId, task: `${c.spec.stepId}.${c.spec.taskId}` };
  }
  return null;
}

async function waitFor(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline)
      throw new SonarError(
        ErrorCode.Timeout,
        `timed out after ${timeoutMs} ms waiting for ${what}`,
      );
    await delay(50);
  }
}

/** The summary block printed at the end of the demo. */
export function summaryLines(s: DemoSummary, color: boolean): string[] {
  const ok = s.state === 'Succeeded';
  return [
    '',
    paint(
      color,
      ok ? 'green' : 'red',
      `run ${s.runId} ${s.state} in ${shortDuration(s.elapsedMs)}`,
    ),
    `  tasks       ${s.tasks} (${s.succeeded} succeeded)`,
    `  retries     ${s.retries} (failed attempts tried again)`,
    `  recoveries  ${s.recoveries}${s.killed ? ` (worker ${s.killed.workerId} was SIGKILLed while running ${s.killed.task}; the task ran again elsewhere)` : ''}`,
    `  elapsed     ${shortDuration(s.elapsedMs)}`,
  ];
}
