import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { beforeAll, describe, expect, it } from 'vitest';
import { IllegalTransitionError } from '../../actors/errors.js';
import { progress } from '../../actors/reconciler/progress.js';
import type { Names } from '../../streams/names.js';
import { ConcurrencyError } from '../../streams/errors.js';
import { aggregateSubject } from '../../streams/names.js';
import type { PoisonedDetail, PoisonedTask } from '../../src/backend/finalize/poisoned-admin.js';
import { apiHandlers } from '../../src/backend/api/handlers/index.js';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedSink } from '../helpers/finalize-fixtures.js';
import type { TestWriter } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import type { FinalizeScene } from '../helpers/finalize-world.js';

const run = promisify(execFile);

const world = finalizeWorldPerFile();
const { nats } = world;
/** The file's one scene: every test reads what the ones before it left. */
let s: FinalizeScene;
let n: Names;
let w: TestWriter;
/** The cause of the poison: a results database that refuses writes until it is fixed. */
let broken = true;

beforeAll(async () => {
  s = await world.scene({ finalizeLeaseMs: 2_000, finalizeMaxDeliver: 2 });
  ({ n, w } = s);
  const sink = new InstrumentedSink(s.kv);
  sink.failWhen = (r) => broken && r.taskId.startsWith('p');
  await s.startPool({
    sink,
    backoffBase: 50,
    env: { SONAR_FINALIZE_MAX_DELIVER: '2' },
    // `sonar poisoned` asks the backend.
    handlers: apiHandlers,
  });
  // r1: ok1 finalizes; p1 and p2 are poisoned. r2: its only task p1 is poisoned.
  const jobs = [
    ...(await s.seed({ runId: 'r1', taskIds: ['ok1', 'p1', 'p2'] })),
    ...(await s.seed({ runId: 'r2', taskIds: ['p1'] })),
  ];
  await s.enqueue(jobs);
  await eventually(() =>
    ['r1.p1', 'r1.p2', 'r2.p1'].every(
      (k) => w.loop.projection.tasks.get(k)?.snapshot.value === 'Poisoned',
    ),
  );
});

/** The reconciler's step and run completion (actors/reconciler/progress.ts), run to rest. */
async function reconcileProgress(): Promise<void> {
  for (let round = 0; round < 10; round++) {
    const events = progress(w.loop.projection);
    if (events.length === 0) return;
    for (const e of events) {
      try {
        await w.writer.write({ subject: aggregateSubject(n, e.ref), type: e.type, data: e.data });
      } catch (err: unknown) {
        if (!(err instanceof IllegalTransitionError || err instanceof ConcurrencyError)) throw err;
      }
    }
  }
}

/** `node bin/sonar.js poisoned ...` against this file's server and prefix. */
async function sonar(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      ['bin/sonar.js', 'poisoned', ...args, '--server', nats.server.url, '--prefix', n.prefix],
      { env: { ...process.env, SONAR_LOG_LEVEL: 'silent' } },
    );
    return { code: 0, stdout, stderr };
  } catch (err: unknown) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const stepState = (key: string) => w.loop.projection.steps.get(key)?.snapshot.value;
const runState = (key: string) => w.loop.projection.runs.get(key)?.snapshot.value;

describe('sonar poisoned', () => {
  it('a poisoned task blocks its step and its run', async () => {
    await reconcileProgress();
    expect(stepState('r1.s1')).toBe('Blocked');
    expect(stepState('r2.s1')).toBe('Blocked');
    expect(runState('r1')).toBe('Running');
    expect(runState('r2')).toBe('Running');
  });

  it('list [--run] [--json]', async () => {
    const all = await sonar('list', '--json');
    expect(all.code).toBe(0);
    const tasks = (JSON.parse(all.stdout) as { tasks: PoisonedTask[] }).tasks;
    expect(tasks.map((t) => t.task)).toEqual(['r1.p1', 'r1.p2', 'r2.p1']);
    expect(tasks[0]).toMatchObject({
      stepId: 's1',
      attemptId: 'a1',
      round: 0,
      outputRef: 'inline',
    });
    expect(tasks[0]!.error).toMatch(/sink refused/);
    const one = await sonar('list', '--run', 'r2');
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^r2\.p1 .*attempt a1/m);
    expect(one.stdout).not.toMatch(/r1\./);
    expect(one.stdout).toMatch(/1 poisoned/);
  });

  it('show RUN.TASK: the error history and the output ref', async () => {
    const shown = await sonar('show', 'r1.p1', '--json');
    expect(shown.code).toBe(0);
    const d = JSON.parse(shown.stdout) as PoisonedDetail;
    expect(d).toMatchObject({ task: 'r1.p1', state: 'Poisoned', outputRef: 'inline' });
    expect(d.errors.map((e) => e.delivery)).toEqual([1, 2]);
    expect(d.poison).toMatchObject({ deliveries: 2, attemptId: 'a1', round: 0 });
    const text = await sonar('show', 'r1.p1');
    expect(text.stdout).toMatch(/errors \(2\):/);
    expect(text.stdout).toMatch(/output: +inline/);
  });

  it('refuses a bad task name (exit 2) and a task that is not poisoned (exit 1)', async () => {
    const bad = await sonar('show', 'no-dot');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^sonar: task must be RUN\.TASK/);
    const done = await sonar('retry', 'r1.ok1');
    expect(done.code).toBe(1);
    expect(done.stderr).toMatch(/^sonar: task r1\.ok1 is Succeeded, not Poisoned/);
    const none = await sonar('cancel', 'r1.nope');
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no task r1\.nope/);
  });

  it('retry, after the cause is fixed, finalizes the task and lets the run succeed', async () => {
    broken = false;
    const out = await sonar('retry', 'r2.p1', '--json', '--by', 'ops');
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual({
      task: 'r2.p1',
      attemptId: 'a1',
      round: 1,
      step: 'Ready',
    });
    await eventually(() => s.stateOf('r2', 'p1') === 'Succeeded');
    const events = await w.store.readAggregate(n.subjects.task('r2', 'p1'));
    expect(events.map((e) => e.type).slice(-3)).toEqual([
      'TaskPoisoned',
      'TaskFinalizeRetried',
      'TaskFinalized',
    ]);
    expect(events.at(-2)?.data).toEqual({ attemptId: 'a1', by: 'ops' });
    await reconcileProgress();
    expect(stepState('r2.s1')).toBe('Succeeded');
    expect(runState('r2')).toBe('Succeeded');
    // The new job had the round in its msg id; the queue is empty again.
    const jsm = await jetstreamManager(nats.nc);
    await eventually(async () => (await jsm.streams.info(n.streams.finalize)).state.messages === 0);
  });

  it('cancel: the task is Cancelled and its Blocked step fails, then its run', async () => {
    // r1: retry p1 (now fine), leaving p2 poisoned: the step is Blocked again.
    expect((await sonar('retry', 'r1.p1')).code).toBe(0);
    await eventually(() => s.stateOf('r1', 'p1') === 'Succeeded');
    await reconcileProgress();
    expect(stepState('r1.s1')).toBe('Blocked');
    expect(runState('r1')).toBe('Running');
    const out = await sonar('cancel', 'r1.p2', '--json');
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual({ task: 'r1.p2', step: 'Failed' });
    expect(s.stateOf('r1', 'p2')).toBe('Cancelled');
    await reconcileProgress();
    expect(runState('r1')).toBe('Failed');
    expect((await sonar('list', '--json')).stdout).toContain('"tasks": []');
  });
});
