import { setTimeout as delay } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import { createOutputStore } from '../../src/storage/create-output-store.js';
import { IllegalStateError, NonRetryableError } from '../../src/worker/errors.js';
import type { TaskHandler, WorkerOptions } from '../../src/worker/options.js';
import { createWorker } from '../../src/worker/worker.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { ensureDispatchConsumer } from '../../streams/provision.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { dispatchRun, eventsOf, runFileOf, taskOf } from '../helpers/worker-fixtures.js';
import { freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);

async function world() {
  const tb = await backends.start();
  const { ctx } = tb;
  const client = new SonarClient(nats.nc, { prefix: ctx.names.prefix });
  const start = async (opts: Partial<WorkerOptions> & { handler: TaskHandler }) => {
    const w = createWorker({
      tags: ['a'],
      nc: nats.nc,
      prefix: ctx.names.prefix,
      drainGraceMs: '2s',
      killGraceMs: '500ms',
      ...opts,
    });
    backends.drainAfter(w);
    await w.start();
    return w;
  };
  const types = async (runId: string, taskId: string) =>
    (await eventsOf(ctx, ctx.names.subjects.task(runId, taskId))).map((e) => e.type);
  return { tb, ctx, client, start, types };
}

describe('createWorker', () => {
  it('never runs more than `slots` tasks at once across its tags, and runs them all', async () => {
    const { ctx, client, start } = await world();
    await client.submit(
      runFileOf('r1', [
        { id: 'sa', tags: ['a'], count: 15 },
        { id: 'sb', tags: ['b'], count: 15 },
      ]),
    );
    let now = 0;
    let peak = 0;
    let heldPeak = 0;
    const w = await start({
      tags: ['a', 'b'],
      slots: 3,
      handler: async (input) => {
        now++;
        peak = Math.max(peak, now);
        heldPeak = Math.max(heldPeak, w.running);
        await delay(60);
        now--;
        return input;
      },
    });
    await dispatchRun(ctx, 'r1');
    await backends.everyTaskHasResult(20_000);
    expect(peak).toBe(3);
    expect(heldPeak).toBeLessThanOrEqual(3);
  });

  it('maps NonRetryableError to a final failure and other errors to a retry', async () => {
    const { ctx, client, start, types } = await world();
    await client.submit(runFileOf('r1', [{ id: 's', tags: ['a'], count: 2 }]));
    await start({
      handler: (_input, t) => {
        if (t.taskId === 't0') throw new NonRetryableError('bad input, no retry');
        throw new Error('flaky');
      },
    });
    await dispatchRun(ctx, 'r1');
    await eventually(() => taskOf(ctx, 'r1', 't0').value === 'Failed');
    await eventually(async () => (await types('r1', 't1')).includes('TaskAttemptFailed'));
    const t1 = taskOf(ctx, 'r1', 't1');
    expect(t1).toMatchObject({ value: 'Pending', context: { failures: 1, error: 'flaky' } });
    expect(t1.context.retryAt).not.toBeNull();
  });

  it('uploads an output over 16 KiB and reports its ref; refuses one over SONAR_MAX_OUTPUT', async () => {
    const { tb, ctx, client, start, types } = await world();
    await client.submit(runFileOf('r1', [{ id: 's', tags: ['a'], count: 2 }]));
    const big = 'x'.repeat(20 * 1024);
    await start({
      maxOutputBytes: 30 * 1024,
      handler: (_input, t) => (t.taskId === 't0' ? big : 'y'.repeat(40 * 1024)),
    });
    const [d0] = await dispatchRun(ctx, 'r1');
    await eventually(async () => (await types('r1', 't0')).includes('TaskResultAccepted'));
    const accepted = (await eventsOf(ctx, ctx.names.subjects.task('r1', 't0'))).find(
      (e) => e.type === 'TaskResultAccepted',
    );
    const ref = `r1/t0/${d0!.attemptId}`;
    expect(accepted?.data).toMatchObject({ outputRef: ref, outputBytes: big.length });
    const store = await createOutputStore(nats.nc, tb.config);
    expect(Buffer.from((await store.get(ref))!).toString()).toBe(big);
    await eventually(() => taskOf(ctx, 'r1', 't1').value === 'Failed');
    expect(taskOf(ctx, 'r1', 't1').context.error).toMatch(
      /output is 40960 bytes, over SONAR_MAX_OUTPUT \(30KiB\)/,
    );
  });

  it("aborts a handler at its step's timeoutMs and reports a retryable failure", async () => {
    const { ctx, client, start } = await world();
    await client.submit(runFileOf('r1', [{ id: 's', tags: ['a'], count: 1, timeoutMs: 200 }]));
    let aborted = false;
    await start({
      handler: async (_input, t) => {
        await new Promise<void>((resolve) => t.signal.addEventListener('abort', () => resolve()));
        aborted = true;
        throw new Error('stopped');
      },
    });
    await dispatchRun(ctx, 'r1');
    await eventually(() => taskOf(ctx, 'r1', 't0').context.failures === 1);
    expect(aborted).toBe(true);
    expect(taskOf(ctx, 'r1', 't0').context.error).toBe('timed out after 200 ms');
  });

  it('aborts a cancelled task and reports nothing', async () => {
    const { ctx, client, start, types } = await world();
    await client.submit(runFileOf('r1', [{ id: 's', tags: ['a'], count: 1 }]));
    let signalled = false;
    const w = await start({
      handler: async (_input, t) => {
        await new Promise<void>((resolve) => t.signal.addEventListener('abort', () => resolve()));
        signalled = true;
        return 'too late';
      },
    });
    await dispatchRun(ctx, 'r1');
    await eventually(() => w.running === 1);
    await client.cancel('r1');
    await eventually(() => signalled && w.running === 0);
    expect(await types('r1', 't0')).toEqual([
      'TaskCreated',
      'TaskPublished',
      'TaskStarted',
      'TaskCancelled',
    ]);
  });

  it('terminates a dispatch message it cannot parse, and goes on', async () => {
    const { ctx, client, start } = await world();
    const w = await start({ handler: () => 'ok' });
    await jetstream(nats.nc).publish(ctx.names.subjects.dispatch('a'), 'not json');
    await jetstream(nats.nc).publish(
      ctx.names.subjects.dispatch('a'),
      JSON.stringify({ runId: 'r1' }),
    );
    const jsm = await jetstreamManager(nats.nc);
    await eventually(async () => {
      const info = await jsm.consumers.info(ctx.names.streams.dispatch, 'dispatch_a');
      return info.num_pending === 0 && info.num_ack_pending === 0;
    });
    await client.submit(runFileOf('r1', [{ id: 's', tags: ['a'], count: 1 }]));
    await dispatchRun(ctx, 'r1');
    await eventually(() => ['Finalizing', 'Succeeded'].includes(taskOf(ctx, 'r1', 't0').value));
    expect(w.state).toBe('Running');
  });

  it('keeps an explicit lifecycle: start twice or drain when stopped is an IllegalStateError', async () => {
    const { ctx, start } = await world();
    const w = await start({ handler: () => 'ok' });
    expect(w.state).toBe('Running');
    await expect(w.start()).rejects.toBeInstanceOf(IllegalStateError);
    await w.drain();
    expect(w.state).toBe('Stopped');
    await expect(w.drain()).rejects.toThrow(/cannot drain while Stopped/);
    expect(ctx.loop.projection.workers.get(w.workerId)?.snapshot.value).toBe('Left');
    expect((await ctx.registry.kv.get(w.workerId))?.operation).toBe('DEL');
  });

  it('ends as Failed when the backend answers conflict (the worker was declared Lost)', async () => {
    const { ctx, client, start } = await world();
    await client.submit(runFileOf('r1', [{ id: 's', tags: ['a'], count: 1 }]));
    const w = await start({ handler: () => 'ok' });
    await new ApiClient(nats.nc, ctx.names).request('exited', { workerId: w.workerId });
    await dispatchRun(ctx, 'r1');
    await expect(w.done).rejects.toMatchObject({ code: 'conflict' });
    expect(w.state).toBe('Failed');
    // The task was never started: it waits in the queue for another worker.
    expect(taskOf(ctx, 'r1', 't0').value).toBe('Published');
  });

  it('joins again when its consumer is gone just after join answered, then binds', async () => {
    // No backend: this test answers the API, so that the consumer can be missing on purpose.
    const n = await freshTopology(nats.nc);
    const joins: unknown[] = [];
    const api = nats.nc.subscribe(n.subjects.apiAll, {
      callback: (_e, m) => {
        void (async (): Promise<void> => {
          // The last token: workers ask on their own subject, <prefix>.api.w.<id>.<verb>.
          const verb = m.subject.split('.').pop();
          if (verb !== 'join') {
            m.respond(JSON.stringify({ ok: {} }));
            return;
          }
          joins.push(m.json());
          // The first join answers with the consumer already deleted (the sweep raced it).
          if (joins.length > 1)
            await ensureDispatchConsumer(await jetstreamManager(nats.nc), n, 'a');
          m.respond(
            JSON.stringify({
              ok: {
                pulseIntervalMs: 1_000,
                pulseTtlMs: 3_000,
                stream: n.streams.dispatch,
                consumers: { a: n.consumers.dispatch('a') },
              },
            }),
          );
        })();
      },
    });
    await nats.nc.flush();
    const w = createWorker({
      tags: ['a'],
      nc: nats.nc,
      prefix: n.prefix,
      handler: () => 'ok',
      drainGraceMs: '0s',
      stopGraceMs: '1s',
    });
    backends.drainAfter(w);
    await w.start();
    expect(w.state).toBe('Running');
    expect(joins).toHaveLength(2);
    expect(joins[1]).toEqual(joins[0]);
    await w.drain();
    api.unsubscribe();
  });
});
