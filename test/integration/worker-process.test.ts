import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EventRecord } from '../../actors/projection.js';
import { SonarClient } from '../../src/client/client.js';
import type { RunFile } from '../../src/protocol.js';
import { loseVanishedWorkers } from '../../src/backend/sweep/lost-workers.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { tempDirPerFile } from '../helpers/temp-dir-per-file.js';
import { dispatchRun, eventsOf, spawnWorker, taskOf } from '../helpers/worker-fixtures.js';
import type { WorkerProcess } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);
const dir = tempDirPerFile('sonar-worker');

async function world(env: Record<string, string> = {}) {
  const tb = await backends.start(env);
  const { ctx } = tb;
  const client = new SonarClient(nats.nc, { prefix: ctx.names.prefix });
  const worker = (id: string, args: string[], extraEnv: Record<string, string> = {}) =>
    spawnWorker(tb.env, ['--worker-id', id, ...args], extraEnv);
  const joined = (id: string) =>
    eventually(() => ctx.loop.projection.workers.get(id)?.snapshot.value === 'Active', {
      timeoutMs: 15_000,
      message: `worker ${id} joined`,
    });
  const events = (runId: string, taskId: string): Promise<EventRecord[]> =>
    eventsOf(ctx, ctx.names.subjects.task(runId, taskId));
  const workerEvents = async (id: string) =>
    (await eventsOf(ctx, ctx.names.subjects.worker(id))).map((e) => e.type);
  /** Spawns worker `id` on tag `a` with `slots` slots (`args` after) and waits until it joined. */
  const joinedWorker = async (id: string, slots: number, args: string[] = []) => {
    const w = worker(id, ['--tags', 'a', '--slots', String(slots), ...args]);
    await joined(id);
    return w;
  };
  /** Submits run `runId`, one step `s` of `tasks` on tag `a`, and dispatches it. */
  const submitOnA = async (
    runId: string,
    tasks: TaskInRun[],
    step: { timeoutMs?: number } = {},
  ) => {
    await client.submit({ runId, steps: [{ id: 's', tags: ['a'], ...step, tasks }] });
    return dispatchRun(ctx, runId);
  };
  /** Waits for the first event of `type` of a task, and returns it. */
  const eventOf = (runId: string, taskId: string, type: EventRecord['type'], timeoutMs?: number) =>
    eventually(async () => (await events(runId, taskId)).find((e) => e.type === type) ?? false, {
      ...(timeoutMs !== undefined && { timeoutMs }),
    });
  return {
    tb,
    ctx,
    client,
    worker,
    joined,
    events,
    workerEvents,
    joinedWorker,
    submitOnA,
    eventOf,
  };
}

type TaskInRun = RunFile['steps'][number]['tasks'][number];

/** The largest number of commands running at once, from `start|end <id> <ns>` log lines. */
function peakConcurrency(log: string): number {
  const marks = log
    .trim()
    .split('\n')
    .map((l) => l.split(' '))
    .map(([kind, , ns]) => ({ d: kind === 'start' ? 1 : -1, t: BigInt(ns!) }))
    .sort((a, b) => (a.t === b.t ? a.d - b.d : a.t < b.t ? -1 : 1));
  let now = 0;
  let peak = 0;
  for (const m of marks) peak = Math.max(peak, (now += m.d));
  return peak;
}

const logged = (log: string) =>
  `echo "start $SONAR_TASK_ID $(date +%s%N)" >> ${log}; sleep 0.3; echo "end $SONAR_TASK_ID $(date +%s%N)" >> ${log}; cat`;

async function exitOf(w: WorkerProcess) {
  const r = await w.exited;
  return { ...r, stderr: w.stderr().slice(-2000) };
}

describe('sonar worker', () => {
  it('takes only tasks of its tags, never more than `slots` at once, and drains on SIGTERM', async () => {
    const { ctx, client, worker, joined, events, workerEvents } = await world();
    const logA = join(dir(), 'a.log');
    const logB = join(dir(), 'b.log');
    const a = worker('wa', ['--tags', 'a', '--slots', '2', '--', 'sh', '-c', logged(logA)]);
    const b = worker('wb', ['--tags', 'b', '--slots', '1', '--', 'sh', '-c', logged(logB)]);
    await Promise.all([joined('wa'), joined('wb')]);
    let peakHeld = 0;
    const sampler = setInterval(() => {
      void ctx.registry.live().then((live) => {
        for (const e of live) peakHeld = Math.max(peakHeld, e.running.length / e.slots);
      });
    }, 50);
    await client.submit({
      runId: 'r1',
      steps: [
        {
          id: 'sa',
          tags: ['a'],
          tasks: Array.from({ length: 8 }, (_, i) => ({ id: `a${i}`, input: { i } })),
        },
        { id: 'sb', tags: ['b'], tasks: Array.from({ length: 4 }, (_, i) => ({ id: `b${i}` })) },
      ],
    });
    await dispatchRun(ctx, 'r1');
    await backends.everyTaskHasResult(30_000);
    clearInterval(sampler);
    for (const [key, t] of ctx.loop.projection.tasks) {
      expect(t.snapshot.context.workerId, key).toBe(key.startsWith('r1.a') ? 'wa' : 'wb');
    }
    expect(peakConcurrency(await readFile(logA, 'utf8'))).toBe(2);
    expect(peakConcurrency(await readFile(logB, 'utf8'))).toBe(1);
    expect(peakHeld).toBeLessThanOrEqual(1);
    // stdout is the output: `cat` gave the input back.
    const accepted = (await events('r1', 'a3')).find((e) => e.type === 'TaskResultAccepted');
    const inline = (accepted?.data as { outputInline: string }).outputInline;
    expect(JSON.parse(Buffer.from(inline, 'base64').toString())).toEqual({ i: 3 });

    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    expect(await exitOf(a)).toMatchObject({ code: 0 });
    expect(await exitOf(b)).toMatchObject({ code: 0 });
    expect(await workerEvents('wa')).toEqual(['WorkerJoined', 'WorkerDraining', 'WorkerLeft']);
    expect(await ctx.registry.kv.get('wa')).toMatchObject({ operation: 'DEL' });
  });

  it("runs each task's own command with its env, and reports a non-zero exit with stderr", async () => {
    const { joinedWorker, submitOnA, eventOf } = await world();
    await joinedWorker('w1', 2);
    const [d] = await submitOnA('r1', [
      {
        id: 'env',
        command: ['sh', '-c', 'printf %s "$SONAR_RUN_ID:$SONAR_TASK_ID:$SONAR_ATTEMPT_ID"'],
      },
      { id: 'bad', command: ['sh', '-c', 'echo "it went wrong" >&2; exit 3'] },
    ]);
    const accepted = await eventOf('r1', 'env', 'TaskResultAccepted');
    const out = Buffer.from((accepted.data as { outputInline: string }).outputInline, 'base64');
    expect(out.toString()).toBe(`r1:env:${d!.attemptId}`);
    const failed = await eventOf('r1', 'bad', 'TaskAttemptFailed');
    expect(failed.data).toMatchObject({
      exitCode: 3,
      retryable: true,
      error: expect.stringMatching(/exited with code 3: it went wrong/),
    });
  });

  it('on SIGTERM lets a short task finish, releases a long one within the grace, and leaves', async () => {
    const { ctx, events, workerEvents, joinedWorker, submitOnA } = await world({
      SONAR_DRAIN_GRACE: '2s',
    });
    const w = await joinedWorker('w1', 2);
    await submitOnA('r1', [
      { id: 'short', command: ['sh', '-c', 'sleep 0.7; echo done'] },
      { id: 'long', command: ['sleep', '20'] },
    ]);
    await eventually(
      () =>
        taskOf(ctx, 'r1', 'long').value === 'Running' &&
        taskOf(ctx, 'r1', 'short').value === 'Running',
    );
    const signalled = Date.now();
    w.child.kill('SIGTERM');
    expect(await exitOf(w)).toMatchObject({ code: 0 });
    const took = Date.now() - signalled;
    expect(took).toBeLessThan(2_000 + 3_000);
    expect((await events('r1', 'short')).map((e) => e.type)).toContain('TaskResultAccepted');
    const requeued = (await events('r1', 'long')).find((e) => e.type === 'TaskRequeued');
    expect(requeued?.data).toMatchObject({ reason: 'worker-released' });
    expect(taskOf(ctx, 'r1', 'long').value).toBe('Pending');
    const types = await workerEvents('w1');
    expect(types).toEqual(['WorkerJoined', 'WorkerDraining', 'WorkerLeft']);
    const draining = (await eventsOf(ctx, ctx.names.subjects.worker('w1')))[1]!;
    expect(draining.data).toMatchObject({ reason: 'shutdown', deadline: expect.any(String) });
  });

  it('releases at once on a second SIGTERM', async () => {
    const { ctx, workerEvents, joinedWorker, submitOnA } = await world({
      SONAR_DRAIN_GRACE: '30s',
    });
    const w = await joinedWorker('w1', 1);
    await submitOnA('r1', [{ id: 'long', command: ['sleep', '20'] }]);
    await eventually(() => taskOf(ctx, 'r1', 'long').value === 'Running');
    w.child.kill('SIGTERM');
    await eventually(async () => (await workerEvents('w1')).includes('WorkerDraining'));
    const second = Date.now();
    w.child.kill('SIGTERM');
    expect(await exitOf(w)).toMatchObject({ code: 0 });
    expect(Date.now() - second).toBeLessThan(5_000);
    expect(taskOf(ctx, 'r1', 'long').value).toBe('Pending');
    expect(await workerEvents('w1')).toEqual(['WorkerJoined', 'WorkerDraining', 'WorkerLeft']);
  });

  it('SIGKILL mid-task leaves the task Running, for the reconciler; the registry key expires', async () => {
    const { ctx, joinedWorker, submitOnA } = await world();
    const w = await joinedWorker('w1', 1);
    await submitOnA('r1', [{ id: 'long', command: ['sleep', '5'] }]);
    await eventually(() => taskOf(ctx, 'r1', 'long').value === 'Running');
    w.child.kill('SIGKILL');
    await w.exited;
    await eventually(async () => (await ctx.registry.live()).length === 0, { timeoutMs: 5_000 });
    expect(taskOf(ctx, 'r1', 'long')).toMatchObject({
      value: 'Running',
      context: { workerId: 'w1' },
    });
    expect(ctx.loop.projection.workers.get('w1')?.snapshot.value).toBe('Active');
  });

  it('kills a hung command at its timeoutMs (SIGTERM, then SIGKILL) and reports a retryable failure', async () => {
    const { ctx, joinedWorker, submitOnA, eventOf } = await world();
    await joinedWorker('w1', 1);
    await submitOnA(
      'r1',
      // Ignores SIGTERM: only the SIGKILL 5 s later ends it.
      [{ id: 'hung', command: ['sh', '-c', 'trap "" TERM; sleep 30'] }],
      { timeoutMs: 300 },
    );
    const failed = await eventOf('r1', 'hung', 'TaskAttemptFailed', 15_000);
    expect(failed.data).toMatchObject({
      error: 'timed out after 300 ms',
      exitCode: 137,
      retryable: true,
    });
    expect(taskOf(ctx, 'r1', 'hung').value).toBe('Pending');
  });

  it('aborts a running command on cancel, reports nothing, and takes the next task', async () => {
    const { ctx, client, events, joinedWorker, submitOnA, eventOf } = await world();
    await joinedWorker('w1', 1);
    await submitOnA('r1', [{ id: 'long', command: ['sleep', '20'] }]);
    await eventually(() => taskOf(ctx, 'r1', 'long').value === 'Running');
    await client.cancel('r1');
    await eventually(async () => (await ctx.registry.live())[0]?.running.length === 0, {
      timeoutMs: 5_000,
    });
    expect((await events('r1', 'long')).map((e) => e.type)).toEqual([
      'TaskCreated',
      'TaskPublished',
      'TaskStarted',
      'TaskCancelled',
    ]);
    await submitOnA('r2', [{ id: 'next', command: ['echo', 'hi'] }]);
    await eventOf('r2', 'next', 'TaskResultAccepted');
  });

  it('a worker stalled past its pulse TTL and declared Lost learns it at its next pulse, and exits', async () => {
    const { ctx, joinedWorker } = await world();
    const w = await joinedWorker('w1', 1);
    // A real stall (SIGSTOP): no pulse, no request, until the key expired. It is idle: only
    // its pulse can tell.
    w.child.kill('SIGSTOP');
    await eventually(async () => (await ctx.registry.live()).length === 0, {
      timeoutMs: 15_000,
      message: "w1's key expired",
    });
    // The judgement a reconciler or sweep makes of a missing key: WorkerLost, then a delete.
    // (Not for a worker that joined less than a pulse TTL ago: retried until it is judged.)
    await eventually(
      async () => (await loseVanishedWorkers(ctx, await ctx.registry.live())).includes('w1'),
      { timeoutMs: 10_000, message: 'w1 declared Lost' },
    );
    w.child.kill('SIGCONT');
    const r = await exitOf(w);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/worker w1 is Lost: its registry key vanished/);
    expect(await ctx.registry.live()).toEqual([]);
  });

  it('a worker whose key expired while no backend declared it Lost puts its key back and carries on', async () => {
    const { ctx, joinedWorker, submitOnA, eventOf } = await world();
    const w = await joinedWorker('w1', 1);
    w.child.kill('SIGSTOP');
    await eventually(async () => (await ctx.registry.live()).length === 0, {
      timeoutMs: 15_000,
      message: "w1's key expired",
    });
    w.child.kill('SIGCONT');
    await eventually(async () => (await ctx.registry.live()).some((e) => e.workerId === 'w1'), {
      timeoutMs: 10_000,
      message: "w1's key is back",
    });
    expect(ctx.loop.projection.workers.get('w1')?.snapshot.value).toBe('Active');
    await submitOnA('r1', [{ id: 't', command: ['echo', 'hi'] }]);
    await eventOf('r1', 't', 'TaskResultAccepted');
    expect(w.child.exitCode).toBeNull();
  });

  it('gives back a message whose start answered `unavailable` (a brown-out), and runs it once the backend is healthy', async () => {
    const { tb, ctx, joinedWorker, submitOnA } = await world();
    const prefix = ctx.names.prefix;
    const w = await joinedWorker('w1', 1, ['--', 'echo', 'done']);
    // Held still (well within its pulse TTL) while the task is queued and the backend goes.
    w.child.kill('SIGSTOP');
    await submitOnA('r1', [{ id: 't', command: ['echo', 'hi'] }]);
    await tb.stop();
    // A browned-out backend: every request is answered, with `unavailable`.
    let starts = 0;
    const brownOut = nats.nc.subscribe(ctx.names.subjects.apiAll, {
      callback: (_err, m) => {
        if (m.subject.endsWith('.start')) starts++;
        m.respond(JSON.stringify({ error: { code: 'unavailable', message: 'brown-out' } }));
      },
    });
    w.child.kill('SIGCONT');
    await eventually(() => /start not carried out: message given back/.test(w.stderr()), {
      timeoutMs: 60_000,
      message: 'the worker gave the message back',
    });
    expect(starts).toBeGreaterThan(0);
    brownOut.unsubscribe();
    const started = await backends.start({ SONAR_PREFIX: prefix });
    await eventually(
      async () =>
        (await eventsOf(started.ctx, started.ctx.names.subjects.task('r1', 't'))).some(
          (e) => e.type === 'TaskResultAccepted',
        ),
      { timeoutMs: 30_000, message: 'the task ran once the backend was back' },
    );
    expect(w.child.exitCode).toBeNull();
  }, 120_000);

  it('exits non-zero when the backend answers conflict (it was declared Lost)', async () => {
    const { ctx, joinedWorker, submitOnA } = await world();
    const w = await joinedWorker('w1', 1);
    await new ApiClient(nats.nc, ctx.names).request('exited', { workerId: 'w1' });
    await submitOnA('r1', [{ id: 't', command: ['true'] }]);
    const r = await exitOf(w);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/sonar: worker w1 is Lost/);
  });
});
