/**
 * Fixtures for the worker and API tests: an in-process backend with the default
 * parts on a fresh prefix, worker processes (`node bin/sonar.js worker ...`), run files, and
 * dispatching by hand (no reconciler unless asked for: tests publish with `dispatchTask`).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import type { EventRecord, TaskSnapshot } from '../../actors/projection.js';
import type { BackendContext } from '../../src/backend/context.js';
import { defaultParts } from '../../src/default-parts.js';
import { finalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { dispatchTask } from '../../src/backend/reconciler/dispatch.js';
import type { Dispatched } from '../../src/backend/reconciler/dispatch.js';
import type { RunFile } from '../../src/protocol.js';
import { eventually } from './eventually.js';
import { startBackend } from './test-backend.js';
import type { TestBackend } from './test-backend.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SONAR_BIN = join(ROOT, 'bin', 'sonar.js');

/** Nothing listens here: spot auto-detection fails at once. */
export const NO_IMDS = 'http://127.0.0.1:9';

/** Short pulses, so that tests about liveness take seconds, not minutes. */
export const TEST_ENV = {
  SONAR_PULSE_INTERVAL: '200ms',
  SONAR_PULSE_TTL: '2s',
  SONAR_DRAIN_GRACE: '3s',
  SONAR_IMDS_URL: NO_IMDS,
} as const;

/**
 * A backend on a fresh prefix, on `nc`: the production parts minus the reconciler loop (these
 * tests publish by hand with `dispatchTask`, deterministically; a reconciler would race
 * them), or with `reconciler: true` all of them (end-to-end tests).
 */
export const startTestBackend = (
  url: string,
  nc: NatsConnection,
  env: Record<string, string> = {},
  opts: { reconciler?: boolean } = {},
): Promise<TestBackend> =>
  startBackend({
    url,
    nc,
    env: { ...TEST_ENV, ...env },
    components: opts.reconciler ? defaultParts.components : [finalizerPool()],
  });

/** A run file: one step per entry, `count` tasks each (`t0`...), all tasks with `command`. */
export function runFileOf(
  runId: string,
  steps: { id: string; tags: string[]; count: number; command?: string[]; timeoutMs?: number }[],
): RunFile {
  let n = 0;
  return {
    runId,
    steps: steps.map((s) => ({
      id: s.id,
      tags: s.tags,
      ...(s.timeoutMs !== undefined && { timeoutMs: s.timeoutMs }),
      tasks: Array.from({ length: s.count }, () => ({
        id: `t${n++}`,
        ...(s.command && { command: s.command }),
        input: { n },
      })),
    })),
  };
}

/** Dispatches every Pending task of `runId` to its first tag (what the reconciler will do). */
export async function dispatchRun(ctx: BackendContext, runId: string): Promise<Dispatched[]> {
  const out: Dispatched[] = [];
  for (const [key, t] of ctx.loop.projection.tasks) {
    if (t.snapshot.context.spec.runId !== runId || t.snapshot.value !== 'Pending') continue;
    out.push(await dispatchTask(ctx, key, t.snapshot.context.spec.tags[0]!));
  }
  return out;
}

export const taskOf = (ctx: BackendContext, runId: string, taskId: string): TaskSnapshot => {
  const t = ctx.loop.projection.tasks.get(`${runId}.${taskId}`);
  if (!t) throw new Error(`no task ${runId}.${taskId}`);
  return t.snapshot;
};

/** Waits until worker `workerId` has joined: Active in the backend's projection. */
export const waitJoined = (
  ctx: BackendContext,
  workerId: string,
  timeoutMs = 20_000,
): Promise<true> =>
  eventually(() => ctx.loop.projection.workers.get(workerId)?.snapshot.value === 'Active', {
    timeoutMs,
    message: `worker ${workerId} joined`,
  });

/**
 * Waits until every task the backend knows has a result: Finalizing or Succeeded (whether
 * its finalizer ran already does not matter to a worker test).
 */
export const everyTaskHasResult = (ctx: BackendContext, timeoutMs: number): Promise<true> =>
  eventually(
    () =>
      [...ctx.loop.projection.tasks.values()].every((t) =>
        ['Finalizing', 'Succeeded'].includes(t.snapshot.value),
      ),
    { timeoutMs },
  );

/** Every stored event of one subject (may be a wildcard). */
export const eventsOf = (ctx: BackendContext, subject: string): Promise<EventRecord[]> =>
  ctx.store.readAggregate(subject);

export interface WorkerProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawns `node bin/sonar.js worker <args>` with the backend's environment. */
export function spawnWorker(
  env: Record<string, string>,
  args: string[],
  extraEnv: Record<string, string> = {},
): WorkerProcess {
  const child = spawn(process.execPath, [SONAR_BIN, 'worker', ...args], {
    cwd: ROOT,
    env: { ...process.env, SONAR_LOG_LEVEL: 'info', ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  liveChildren.add(child);
  void exited.then(() => liveChildren.delete(child));
  return { child, stdout: () => out, stderr: () => err, exited };
}

const liveChildren = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of liveChildren) c.kill('SIGKILL');
});

/** Kills every worker process still running (afterAll). */
export async function killWorkers(): Promise<void> {
  const waits = [...liveChildren].map(
    (c) =>
      new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      }),
  );
  await Promise.all(waits);
}

/** Spawns `sonar worker` on tag `tags` with `slots` slots, every task of it running `sh -c script`. */
export const spawnShellWorker = (
  env: Record<string, string>,
  slots: number,
  script: string,
  tags = 'linux',
): WorkerProcess =>
  spawnWorker(env, ['--tags', tags, '--slots', String(slots), '--', 'sh', '-c', script]);
