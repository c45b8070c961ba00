import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import { SonarClient } from '../../src/client/client.js';
import { runFileHash, validateRunFile } from '../../src/run-file.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { names } from '../../streams/names.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { runSonar } from '../helpers/sonar-process.js';
import { dispatchRun, eventsOf, runFileOf } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);

async function world(env: Record<string, string> = {}) {
  const tb = await backends.start(env);
  const n = tb.ctx.names;
  return {
    tb,
    ctx: tb.ctx,
    n,
    client: new SonarClient(nats.nc, { prefix: n.prefix }),
    api: new ApiClient(nats.nc, n, { retryForMs: 0 }),
    runEvents: async (runId: string) =>
      (await Promise.all(n.subjects.runAll(runId).map((s) => eventsOf(tb.ctx, s))))
        .flat()
        .sort((a, b) => a.seq - b.seq),
  };
}

describe('submit', () => {
  it('submits a 20k-task run in chunks, RunSubmitted last', async () => {
    const { ctx, n, client, runEvents } = await world();
    let chunks = 0;
    const spy = nats.nc.subscribe(n.subjects.api('submit.tasks'), {
      callback: () => {
        chunks++;
      },
    });
    const file = runFileOf('big', [
      { id: 's1', tags: ['a'], count: 12_000 },
      { id: 's2', tags: ['b'], count: 8_000 },
    ]);
    const started = performance.now();
    await expect(client.submit(file)).resolves.toEqual({ runId: 'big', taskCount: 20_000 });
    const ms = performance.now() - started;
    spy.unsubscribe();
    expect(chunks).toBe(20);
    const events = await runEvents('big');
    expect(events.filter((e) => e.type === 'TaskCreated')).toHaveLength(20_000);
    expect(events.at(-1)).toMatchObject({
      type: 'RunSubmitted',
      data: { runId: 'big', stepIds: ['s1', 's2'], taskCount: 20_000 },
    });
    expect(ctx.loop.projection.stepTasks.get('big.s2')).toHaveLength(8_000);
    console.log(
      `20k-task submit: ${Math.round(ms)} ms, ${Math.round(20_000 / (ms / 1000))} tasks/s`,
    );
  });

  it('completes a cut-short submit when the same file is sent again', async () => {
    const { client, api, runEvents } = await world();
    const file = runFileOf('r1', [{ id: 's1', tags: ['a'], count: 1500 }]);
    const parsed = validateRunFile(file, { maxInputBytes: 1 << 20 });
    // The first attempt got as far as begin and one chunk.
    await api.request('submit.begin', {
      runId: 'r1',
      hash: runFileHash(parsed),
      steps: [{ id: 's1', tags: ['a'], after: [], output: 'bytes', taskCount: 1500 }],
      taskCount: 1500,
    });
    await api.request('submit.tasks', {
      runId: 'r1',
      stepId: 's1',
      tasks: parsed.steps[0]!.tasks.slice(0, 1000),
    });
    await expect(api.request('submit.commit', { runId: 'r1' })).rejects.toMatchObject({
      code: 'validation',
      message: expect.stringMatching(/'steps.s1' has 1000 of its 1500 tasks/),
    });
    await expect(client.submit(file)).resolves.toEqual({ runId: 'r1', taskCount: 1500 });
    const count = (await runEvents('r1')).length;
    expect(count).toBe(1 + 1500 + 1);
    // Once more, after the commit: the same answer, nothing new.
    await expect(client.submit(file)).resolves.toEqual({ runId: 'r1', taskCount: 1500 });
    expect((await runEvents('r1')).length).toBe(count);
  });

  it('refuses a different file under an existing runId with conflict', async () => {
    const { client, runEvents } = await world();
    await client.submit(runFileOf('r1', [{ id: 's1', tags: ['a'], count: 3 }]));
    const before = (await runEvents('r1')).length;
    await expect(
      client.submit(runFileOf('r1', [{ id: 's1', tags: ['a'], count: 4 }])),
    ).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringMatching(/different run file/),
    });
    await expect(
      client.submit(runFileOf('r1', [{ id: 'other', tags: ['a'], count: 3 }])),
    ).rejects.toMatchObject({ code: 'conflict' });
    expect((await runEvents('r1')).length).toBe(before);
  });

  it('refuses a bad run file whole, on the client and on the backend, writing nothing', async () => {
    const { client, api, runEvents } = await world({ SONAR_MAX_INPUT: '1KiB' });
    const bad = {
      runId: 'r2',
      steps: [
        { id: 'a', tags: ['x'], after: ['b'], tasks: [{ id: 't1' }] },
        { id: 'b', tags: [], after: ['a'], tasks: [{ id: 'bad id' }] },
      ],
    };
    const err = await client.submit(bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues.length).toBeGreaterThanOrEqual(3);
    // The backend checks the same, for clients that skip the SDK.
    await expect(
      api.request('submit.begin', {
        runId: 'r2',
        hash: 'h',
        steps: [
          { id: 'a', tags: ['x'], after: ['b'], output: 'bytes', taskCount: 1 },
          { id: 'b', tags: ['x'], after: ['a', 'zz'], output: 'bytes', taskCount: 1 },
        ],
        taskCount: 3,
      }),
    ).rejects.toMatchObject({
      code: 'validation',
      message: expect.stringMatching(/names unknown step "zz".*cycle in 'after'.*'taskCount' is 3/),
    });
    await api.request('submit.begin', {
      runId: 'r3',
      hash: 'h',
      steps: [{ id: 'a', tags: ['x'], after: [], output: 'bytes', taskCount: 2 }],
      taskCount: 2,
    });
    await expect(
      api.request('submit.tasks', {
        runId: 'r3',
        stepId: 'a',
        tasks: [{ id: 't1', input: 'x'.repeat(2000) }, { id: 't1' }],
      }),
    ).rejects.toMatchObject({
      code: 'validation',
      message: expect.stringMatching(/SONAR_MAX_INPUT \(1KiB\).*duplicate task id "t1"/),
    });
    await expect(
      api.request('submit.tasks', {
        runId: 'r3',
        stepId: 'a',
        tasks: Array.from({ length: 1001 }, (_, i) => ({ id: `t${i}` })),
      }),
    ).rejects.toMatchObject({ code: 'validation', message: expect.stringMatching(/'tasks'/) });
    await expect(
      api.request('submit.tasks', { runId: 'r3', stepId: 'nope', tasks: [{ id: 't1' }] }),
    ).rejects.toMatchObject({ code: 'not_found' });
    expect(await runEvents('r2')).toHaveLength(0);
    expect((await runEvents('r3')).map((e) => e.type)).toEqual(['StepCreated']);
  });
});

describe('admission control (SONAR_MAX_OPEN_TASKS)', () => {
  it('refuses a submit past the limit with `overloaded`, once, and takes it once tasks settle', async () => {
    const { tb, ctx, n, client, runEvents } = await world({ SONAR_MAX_OPEN_TASKS: '10' });
    await client.submit(runFileOf('r1', [{ id: 's1', tags: ['a'], count: 6 }]));
    let begins = 0;
    const spy = nats.nc.subscribe(n.subjects.api('submit.begin'), {
      callback: () => {
        begins++;
      },
    });
    await nats.nc.flush();
    const r2 = runFileOf('r2', [{ id: 's1', tags: ['a'], count: 5 }]);
    const err = await client.submit(r2).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'overloaded',
      message:
        'submit refused: 6 tasks are open and this run adds 5, over SONAR_MAX_OPEN_TASKS (10): ' +
        'submit again once open tasks have settled, or raise SONAR_MAX_OPEN_TASKS on the backends',
      details: { open: 6, adding: 5, limit: 10, setting: 'SONAR_MAX_OPEN_TASKS' },
    });
    // Not retried like `unavailable`: one request, one answer.
    await nats.nc.flush();
    expect(begins).toBe(1);
    spy.unsubscribe();
    expect(await runEvents('r2')).toHaveLength(0);

    // The CLI says so in one line and exits 1.
    const dir = await mkdtemp(join(tmpdir(), 'sonar-admission-'));
    try {
      await writeFile(join(dir, 'r2.json'), JSON.stringify(r2));
      const cli = await runSonar('submit', ['submit', join(dir, 'r2.json')], tb.env);
      expect(cli.code).toBe(1);
      expect(cli.stdout).toBe('');
      expect(cli.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(
          /^sonar: submit refused: 6 tasks are open and this run adds 5, over SONAR_MAX_OPEN_TASKS \(10\)/,
        ) as unknown,
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await runEvents('r2')).toHaveLength(0);

    // A run whose tasks all exist (the same file again) adds nothing and is never refused.
    await expect(
      client.submit(runFileOf('r1', [{ id: 's1', tags: ['a'], count: 6 }])),
    ).resolves.toEqual({ runId: 'r1', taskCount: 6 });

    // The backend is still up: once the open tasks settle, the same submit goes through.
    await client.cancel('r1');
    await expect(client.submit(r2)).resolves.toEqual({ runId: 'r2', taskCount: 5 });
    expect(ctx.loop.projection.tasksByState.Pending.size).toBe(5);
  });
});

describe('ApiClient and error codes it does not know', () => {
  it('fails at once on an unknown code (a newer backend), keeping the code received', async () => {
    const n = names('zzcodes');
    let asked = 0;
    const responder = nats.nc.subscribe(n.subjects.api('cancel'), {
      callback: (_e, m) => {
        asked++;
        m.respond(
          JSON.stringify({ error: { code: 'brand_new', message: 'not now', details: {} } }),
        );
      },
    });
    await nats.nc.flush();
    const api = new ApiClient(nats.nc, n, { retryForMs: 10_000 });
    await expect(api.request('cancel', { runId: 'r1' })).rejects.toMatchObject({
      code: 'unknown',
      message: 'not now',
      details: { code: 'brand_new' },
    });
    expect(asked).toBe(1);
    responder.unsubscribe();
  });
});

describe('cancel', () => {
  it('cancels a run: RunCancelled, its open tasks, its unfinished steps, and a control message', async () => {
    const { ctx, n, client, runEvents } = await world();
    await client.submit(
      runFileOf('r1', [
        { id: 's1', tags: ['a'], count: 3 },
        { id: 's2', tags: ['a'], count: 2 },
      ]),
    );
    await dispatchRun(ctx, 'r1');
    const controls: unknown[] = [];
    const sub = nats.nc.subscribe(n.subjects.controlCancel, {
      callback: (_e, m) => {
        controls.push(m.json());
      },
    });
    await nats.nc.flush();
    await expect(client.cancel('r1', { reason: 'enough' })).resolves.toEqual({
      runId: 'r1',
      cancelled: 5,
    });
    const types = (await runEvents('r1')).map((e) => e.type);
    expect(types.filter((t) => t === 'TaskCancelled')).toHaveLength(5);
    expect(types.filter((t) => t === 'StepSkipped')).toHaveLength(2);
    expect(types.indexOf('RunCancelled')).toBeLessThan(types.indexOf('TaskCancelled'));
    await eventually(() => controls.length === 1);
    expect(controls[0]).toEqual({ runId: 'r1' });
    // Again: nothing left to cancel, the same shape of answer.
    await expect(client.cancel('r1')).resolves.toEqual({ runId: 'r1', cancelled: 0 });
    sub.unsubscribe();
    expect((await client.status('r1')).state).toBe('Cancelled');
  });

  it('cancels one task, and refuses an unknown run or task', async () => {
    const { ctx, client } = await world();
    await client.submit(runFileOf('r1', [{ id: 's1', tags: ['a'], count: 2 }]));
    await expect(client.cancel('r1', { taskId: 't1' })).resolves.toEqual({
      runId: 'r1',
      taskId: 't1',
      cancelled: 1,
    });
    expect(ctx.loop.projection.tasks.get('r1.t1')?.snapshot.value).toBe('Cancelled');
    expect(ctx.loop.projection.tasks.get('r1.t0')?.snapshot.value).toBe('Pending');
    await expect(client.cancel('nope')).rejects.toMatchObject({ code: 'not_found' });
    await expect(client.cancel('r1', { taskId: 'nope' })).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(await client.status('r1')).toMatchObject({
      state: 'Running',
      taskCount: 2,
      steps: { s1: 'Ready' },
      tasks: { Pending: 1, Cancelled: 1 },
    });
  });
});
