import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/backend/backend.js';
import { BackendMetrics } from '../../src/backend/backend-metrics.js';
import { finalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { reconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import { SonarClient } from '../../src/client/client.js';
import { HttpComponent, httpComponent } from '../../src/http/http-component.js';
import { sendJson } from '../../src/http/server.js';
import { createWorker } from '../../src/worker/worker.js';
import type { Worker } from '../../src/worker/worker.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { startBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();
let backend: Backend;
let http: HttpComponent;
let worker: Worker;

beforeAll(async () => {
  const tb = await startBackend({
    url: nats.server.url,
    nc: nats.nc,
    env: {
      SONAR_PULSE_INTERVAL: '200ms',
      SONAR_PULSE_TTL: '2s',
      SONAR_TICK: '500ms',
      SONAR_LOCK_TTL: '2s',
      SONAR_HTTP_PORT: '0',
    },
    // The reconciler and finalizers, plus an http component with a route of its own.
    components: [
      finalizerPool(),
      reconcilerLoop(),
      httpComponent({
        routes: [
          (s) =>
            s.route('GET', '/extra/', (_req, res, url) =>
              sendJson(res, 200, { path: url.pathname }),
            ),
        ],
      }),
    ],
  });
  backend = tb.backend;
  http = tb.component(HttpComponent);
  worker = createWorker({
    tags: ['a'],
    slots: 2,
    nc: nats.nc,
    prefix: backend.ctx.config.prefix,
    spot: false,
    handler: (input) => JSON.stringify(input ?? null),
  });
  await worker.start();
});
afterAll(async () => {
  await worker?.drain('shutdown').catch(() => {});
  await backend?.stop();
});

const get = (path: string) => fetch(`http://127.0.0.1:${http.server.port}${path}`);

/** `name{labels} value` of one series, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Every series named in `want` has its value in `text` (one diff shows all that differ). */
function expectSamples(text: string, want: Record<string, number>): void {
  expect(Object.fromEntries(Object.keys(want).map((s) => [s, sample(text, s)]))).toEqual(want);
}

describe('the HTTP server (SONAR_HTTP_PORT)', () => {
  it('is off unless SONAR_HTTP_PORT is set', () => {
    const ctx = { ...backend.ctx, config: { ...backend.ctx.config, httpPort: undefined } };
    expect(httpComponent()(ctx)).not.toBeInstanceOf(HttpComponent);
    expect(httpComponent()(backend.ctx)).toBeInstanceOf(HttpComponent);
  });

  it('serves /healthz, /readyz, mounted routes, and 404/405 otherwise', async () => {
    expect(await (await get('/healthz')).json()).toEqual({ ok: true });
    const ready = await get('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      ready: true,
      checks: {
        connected: true,
        jetstream: true,
        topology: true,
        caughtUp: true,
        projection: true,
      },
      lag: 0,
      storeFull: null,
    });
    expect(await (await get('/extra/x/y')).json()).toEqual({ path: '/extra/x/y' });
    expect((await get('/nope')).status).toBe(404);
    expect(
      (await fetch(`http://127.0.0.1:${http.server.port}/metrics`, { method: 'POST' })).status,
    ).toBe(405);
  });

  it('exposes metrics that move: publishes go up after a submit', async () => {
    const before = await (await get('/metrics')).text();
    expectSamples(before, {
      sonar_task_publishes_total: 0,
      'sonar_task_requeues_total{reason="worker-lost"}': 0,
      sonar_workers_live: 1,
      'sonar_capacity{tag="a"}': 2,
      sonar_capacity_global: 2,
      sonar_finalize_queue_depth: 0,
    });

    const runId = 'm1';
    await new SonarClient(nats.nc, { prefix: backend.ctx.names.prefix }).submit({
      runId,
      steps: [
        { id: 's', tags: ['a'], tasks: [1, 2, 3].map((i) => ({ id: `t${i}`, input: { i } })) },
      ],
    });
    await eventually(
      () => backend.ctx.loop.projection.runs.get(runId)?.snapshot.value === 'Succeeded',
      {
        timeoutMs: 20_000,
      },
    );
    const after = await (await get('/metrics')).text();
    expectSamples(after, {
      sonar_task_publishes_total: 3,
      'sonar_tasks{state="Succeeded"}': 3,
      sonar_tasks_finalized_total: 3,
      sonar_tasks_poisoned: 0,
      'sonar_workers{state="Active"}': 1,
      sonar_reconciler_leader: 1,
    });
    expect(
      sample(after, 'sonar_reconcile_pass_duration_seconds_count{kind="full"}'),
    ).toBeGreaterThan(0);
    expect(after).toContain('# TYPE sonar_finalize_lease_renewals_total counter');
    expectSamples(after, {
      'sonar_task_queue_wait_seconds_count{tag="a"}': 3,
      'sonar_task_run_seconds_count{tag="a"}': 3,
      'sonar_task_finalize_seconds_count{tag="a"}': 3,
    });
  });

  it('observes each move of a task once across the fleet: by the backend that wrote it', async () => {
    const second = await startBackend({
      url: nats.server.url,
      nc: nats.nc,
      prefix: backend.ctx.names.prefix,
      components: [finalizerPool()],
    });
    const metrics = [new BackendMetrics(backend.ctx), new BackendMetrics(second.ctx)];
    try {
      const before = await Promise.all(metrics.map((m) => m.scrape()));
      const runId = 'm2';
      await new SonarClient(nats.nc, { prefix: backend.ctx.names.prefix }).submit({
        runId,
        steps: [
          { id: 's', tags: ['a'], tasks: Array.from({ length: 40 }, (_, i) => ({ id: `t${i}` })) },
        ],
      });
      await eventually(
        () => backend.ctx.loop.projection.runs.get(runId)?.snapshot.value === 'Succeeded',
        { timeoutMs: 30_000 },
      );
      const after = await Promise.all(metrics.map((m) => m.scrape()));
      for (const stage of ['queue_wait', 'run', 'finalize']) {
        const series = `sonar_task_${stage}_seconds_count{tag="a"}`;
        const moved = after.map(
          (text, i) => (sample(text, series) ?? 0) - (sample(before[i]!, series) ?? 0),
        );
        expect({ stage, total: moved[0]! + moved[1]! }).toEqual({ stage, total: 40 });
      }
    } finally {
      for (const m of metrics) m.close();
      await second.stop();
    }
  });
});
