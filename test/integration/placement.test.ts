import { describe, expect, it } from 'vitest';
import type { EventRecord } from '../../actors/projection.js';
import { isSonarError } from '../../actors/errors.js';
import { SonarClient } from '../../src/client/client.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { createWorker } from '../../src/worker/worker.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import type { TestBackend } from '../helpers/test-backend.js';
import { eventsOf } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);

/** An SDK worker on `linux` whose handler fails the attempts `fails` says to. */
async function worker(tb: TestBackend, slots: number, fails: (taskId: string) => boolean) {
  const w = createWorker({
    tags: ['linux'],
    slots,
    nc: nats.nc,
    prefix: tb.ctx.names.prefix,
    handler: (_input, ctx) => {
      if (fails(ctx.taskId)) throw new Error('not yet');
      return 'ok';
    },
  });
  backends.drainAfter(w);
  await w.start();
  return w;
}

const events = (tb: TestBackend, runId: string, taskId: string): Promise<EventRecord[]> =>
  eventsOf(tb.ctx, tb.ctx.names.subjects.task(runId, taskId));

/** Server time of the task's first event of `type`. */
async function timeOf(tb: TestBackend, runId: string, taskId: string, type: string) {
  const found = (await events(tb, runId, taskId)).find((e) => e.type === type);
  if (!found) throw new Error(`${runId}.${taskId}: no ${type}`);
  return Date.parse(found.time);
}

const succeeded = (tb: TestBackend, keys: string[]) => () =>
  keys.every((k) => tb.ctx.loop.projection.tasks.get(k)?.snapshot.value === 'Succeeded');

describe('placement with a real backend: delays, priorities, retry policy', () => {
  it('starts a delayed task no earlier than its time, and others meanwhile', async () => {
    const tb = await backends.start({}, { reconciler: true });
    await worker(tb, 2, () => false);
    const client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix });
    const notBefore = new Date(Date.now() + 4_000).toISOString();
    await client.submit({
      runId: 'delays',
      steps: [
        {
          id: 's',
          tags: ['linux'],
          tasks: [{ id: 'later', delay: '5s' }, { id: 'at', notBefore }, { id: 'now' }],
        },
      ],
    });
    await eventually(succeeded(tb, ['delays.later', 'delays.at', 'delays.now']), {
      timeoutMs: 20_000,
    });
    const created = await timeOf(tb, 'delays', 'later', 'TaskCreated');
    expect(await timeOf(tb, 'delays', 'later', 'TaskPublished')).toBeGreaterThanOrEqual(
      created + 5_000,
    );
    expect(await timeOf(tb, 'delays', 'at', 'TaskPublished')).toBeGreaterThanOrEqual(
      Date.parse(notBefore),
    );
    // Not held back behind them: placed first, though created last.
    expect(await timeOf(tb, 'delays', 'now', 'TaskPublished')).toBeLessThan(
      await timeOf(tb, 'delays', 'at', 'TaskPublished'),
    );
  });

  it('runs a high-priority step ahead of older low-priority work', async () => {
    const tb = await backends.start({}, { reconciler: true });
    const client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix });
    const tasks = (prefix: string) => [0, 1, 2].map((i) => ({ id: `${prefix}${i}` }));
    // Both wait before any worker joins: the low run is older, the high one goes first.
    await client.submit({ runId: 'low', steps: [{ id: 's', tags: ['linux'], tasks: tasks('l') }] });
    await client.submit({
      runId: 'high',
      steps: [{ id: 's', tags: ['linux'], priority: 10, tasks: tasks('h') }],
    });
    await worker(tb, 1, () => false);
    const keys = [
      ...tasks('l').map((t) => `low.${t.id}`),
      ...tasks('h').map((t) => `high.${t.id}`),
    ];
    await eventually(succeeded(tb, keys), { timeoutMs: 20_000 });
    const started: [string, number][] = [];
    for (const key of keys) {
      const [runId, taskId] = key.split('.') as [string, string];
      started.push([key, await timeOf(tb, runId, taskId, 'TaskStarted')]);
    }
    const order = started.sort((a, b) => a[1] - b[1]).map(([key]) => key);
    expect(order).toEqual(['high.h0', 'high.h1', 'high.h2', 'low.l0', 'low.l1', 'low.l2']);
  });

  it("waits out its step's retry policy after a failure, and takes the step's maxAttempts", async () => {
    const tb = await backends.start({}, { reconciler: true });
    let failures = 0;
    await worker(tb, 1, () => failures++ < 2);
    const client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix });
    await client.submit({
      runId: 'retry',
      steps: [
        {
          id: 's',
          tags: ['linux'],
          retry: { maxAttempts: 4, backoff: 'fixed', initial: '1500ms', max: '1500ms' },
          tasks: [{ id: 't' }],
        },
      ],
    });
    await eventually(succeeded(tb, ['retry.t']), { timeoutMs: 20_000 });
    const log = await events(tb, 'retry', 't');
    expect(log[0]!.data).toMatchObject({ maxAttempts: 4 });
    const failed = log.filter((e) => e.type === 'TaskAttemptFailed');
    expect(failed).toHaveLength(2);
    for (const f of failed) {
      const wait = Date.parse((f.data as { retryAt: string }).retryAt) - Date.parse(f.time);
      expect(wait).toBeGreaterThan(1_200);
      expect(wait).toBeLessThan(1_800);
    }
    const published = log.filter((e) => e.type === 'TaskPublished').map((e) => Date.parse(e.time));
    for (const [i, f] of failed.entries()) {
      const retryAt = Date.parse((f.data as { retryAt: string }).retryAt);
      expect(published[i + 1]).toBeGreaterThanOrEqual(retryAt);
    }
  });

  it('refuses, with nothing written, a run with a priority while an older backend leads', async () => {
    const tb = await backends.start({}, { reconciler: false });
    // What an older leader appends: no `honors`.
    await tb.write(tb.ctx.names.subjects.system('reconciler'), 'ReconcilerElected', {
      nodeId: 'old-backend',
    });
    const api = new ApiClient(nats.nc, tb.ctx.names, { retryForMs: 0 });
    const begin = (priority?: number) =>
      api.request('submit.begin', {
        runId: priority === undefined ? 'plain' : 'ranked',
        hash: 'h1',
        taskCount: 0,
        steps: [
          { id: 's', tags: ['linux'], taskCount: 0, ...(priority !== undefined && { priority }) },
        ],
      });
    const refused = await begin(5).catch((err: unknown) => err);
    expect(isSonarError(refused) && refused.code).toBe('unavailable');
    expect((refused as Error).message).toMatch(
      /'steps.0.priority' needs a reconciler that honors priority, and the leader \(old-backend\) is an older backend/,
    );
    expect(tb.ctx.loop.projection.steps.has('ranked.s')).toBe(false);
    await expect(begin()).resolves.toMatchObject({ runId: 'plain' });
  });
});
