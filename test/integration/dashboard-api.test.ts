import { request } from 'node:http';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import { dispatchTask } from '../../src/backend/reconciler/dispatch.js';
import type { Command } from '../../src/backend/projection/event-writer.js';
import type { OverviewView } from '../../src/http/dashboard/views/overview-view.js';
import type { PublicEvent } from '../../src/http/dashboard/views/public-event.js';
import type { RunDetail, RunSummary, StepView } from '../../src/http/dashboard/views/runs-view.js';
import type { TaskView } from '../../src/http/dashboard/views/task-view.js';
import { createLogger } from '../../src/log.js';
import { call, startDashboardBackend } from '../helpers/dashboard-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';

const HOSTILE = '<img src=x onerror=alert(1)>';
const TOKEN = 'dashboard-test-token-0123456789';

const nats = serverPerFile();
let open: TestBackend;
let locked: TestBackend;
const logLines: string[] = [];

beforeAll(async () => {
  open = await startDashboardBackend(nats.server.url, nats.nc);
  locked = await startDashboardBackend(nats.server.url, nats.nc, {
    env: { SONAR_HTTP_TOKEN: TOKEN },
    log: createLogger({ level: 'debug', destination: { write: (l) => logLines.push(l) } }),
  });
  await seed(open);
});

afterAll(async () => {
  await open?.stop();
  await locked?.stop();
});

/**
 * Run `r1`: step `a` (tasks t0, t1) and step `b` after `a` (t2). t0 is published, started on
 * worker w1 and fails for good with a hostile error; t1 stays Pending; step a is starved.
 */
async function seed(b: TestBackend): Promise<void> {
  const { ctx } = b;
  const client = new SonarClient(nats.nc, { prefix: ctx.names.prefix });
  await client.submit({
    runId: 'r1',
    steps: [
      {
        id: 'a',
        tags: ['linux'],
        tasks: [
          { id: 't0', command: ['true'], input: { password: 'p4ss' }, maxAttempts: 1 },
          { id: 't1', command: ['true'] },
        ],
      },
      { id: 'b', tags: ['linux'], after: ['a'], tasks: [{ id: 't2', command: ['true'] }] },
    ],
  });
  await eventually(() => ctx.loop.projection.runs.get('r1')?.snapshot.value === 'Running');
  const w = (subject: string, type: Command['type'], data: unknown) =>
    ctx.writer.write({ subject, type, data });
  await w(ctx.names.subjects.worker('w1'), 'WorkerJoined', {
    workerId: 'w1',
    host: `<b>host</b>`,
    tags: ['linux'],
    slots: 2,
  });
  const kv = await new Kvm(nats.nc).open(ctx.names.buckets.workers);
  await kv.put(
    'w1',
    JSON.stringify({
      workerId: 'w1',
      host: '<b>host</b>',
      tags: ['linux'],
      slots: 2,
      active: true,
      pulseAt: new Date().toISOString(),
      running: [],
    }),
  );
  const { attemptId } = await dispatchTask(ctx, 'r1.t0', 'linux');
  const task = ctx.names.subjects.task('r1', 't0');
  await w(task, 'TaskStarted', { attemptId, workerId: 'w1' });
  await w(task, 'TaskAttemptFailed', {
    attemptId,
    workerId: 'w1',
    exitCode: 1,
    error: HOSTILE,
    retryable: false,
  });
  await w(ctx.names.subjects.step('r1', 'a'), 'StepStarved', { tags: ['linux'] });
}

describe('dashboard read API', () => {
  it('GET /api/overview: workers, capacity, queue, poisoned, starved steps', async () => {
    const { status, json } = await call<OverviewView>(`${open.url}/api/overview`);
    expect(status).toBe(200);
    expect(json.workers).toEqual([
      expect.objectContaining({
        workerId: 'w1',
        host: '<b>host</b>',
        state: 'Active',
        tags: ['linux'],
        slots: 2,
        pulsing: true,
        eligible: true,
      }),
    ]);
    expect(json.capacity.tags).toEqual([
      { tag: 'linux', total: 2, published: 0, running: 0, free: 2 },
    ]);
    expect(json.capacity.global).toEqual({ total: 2, published: 0, running: 0, free: 2 });
    expect(json.finalizeQueue).toBe(0);
    expect(json.poisoned).toBe(0);
    expect(json.starved).toEqual([{ step: 'r1.a', runId: 'r1', stepId: 'a', tags: ['linux'] }]);
  });

  it('GET /api/runs and /api/runs/:id: state, progress, DAG depth and timelines', async () => {
    const list = await call<{ runs: RunSummary[] }>(`${open.url}/api/runs`);
    expect(list.status).toBe(200);
    expect(list.json.runs).toEqual([
      expect.objectContaining({ runId: 'r1', state: 'Running', taskCount: 3, progress: 0 }),
    ]);
    expect(list.json.runs[0]!.counts).toMatchObject({ Failed: 1, Pending: 2 });

    const run = await call<RunDetail>(`${open.url}/api/runs/r1`);
    expect(run.status).toBe(200);
    const [a, b] = run.json.steps as [StepView, StepView];
    expect(a).toMatchObject({ stepId: 'a', depth: 0, after: [], starved: true, taskCount: 2 });
    expect(b).toMatchObject({ stepId: 'b', depth: 1, after: ['a'], state: 'Waiting' });
    expect(a.timeline.map((e) => e.type)).toEqual(['StepCreated', 'StepStarved']);
    expect(a.tasks.map((t) => t.taskId)).toEqual(['t0', 't1']);
  });

  it('GET /api/tasks/:run/:task: history with attempts, never the token hash or input', async () => {
    const { status, json, text } = await call<TaskView>(`${open.url}/api/tasks/r1/t0`);
    expect(status).toBe(200);
    expect(json).toMatchObject({ task: 'r1.t0', state: 'Failed', error: HOSTILE, workerId: 'w1' });
    expect(json.history.map((e) => e.type)).toEqual([
      'TaskCreated',
      'TaskPublished',
      'TaskStarted',
      'TaskAttemptFailed',
    ]);
    expect(json.attempts).toEqual([
      expect.objectContaining({
        attempt: 1,
        workerId: 'w1',
        outcome: 'TaskAttemptFailed',
        detail: HOSTILE,
      }),
    ]);
    expect(text).not.toMatch(/tokenHash|p4ss/);
    expect(json.history[0]!.data['inputBytes']).toBeGreaterThan(0);
  });

  it('GET /api/events filters like sonar tail', async () => {
    const { json } = await call<{ events: PublicEvent[] }>(
      `${open.url}/api/events?run=r1&type=TaskStarted`,
    );
    expect(json.events.map((e) => e.subject)).toEqual([
      `${open.ctx.names.prefix}.events.task.r1.t0`,
    ]);
    const bad = await call(`${open.url}/api/events?type=Nope`);
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('validation');
  });

  it('refuses bad ids (400), unknown runs (404) and unknown routes (404)', async () => {
    expect((await call(`${open.url}/api/runs/bad.id`)).status).toBe(400);
    expect((await call(`${open.url}/api/runs/nope`)).json.error.code).toBe('not_found');
    expect((await call(`${open.url}/api/nothing-here`)).status).toBe(404);
    expect((await call(`${open.url}/api/runs/r1`, { method: 'DELETE' })).status).toBe(405);
    expect((await call(`${open.url}/healthz`)).status).toBe(200);
  });

  it('escapes every value in the HTML pages (no XSS from errors, hosts or ids)', async () => {
    const task = await call(`${open.url}/tasks/r1/t0`);
    expect(task.status).toBe(200);
    expect(task.text).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(task.text).not.toContain(HOSTILE);
    expect(task.headers.get('content-security-policy')).toContain("script-src 'self'");
    const overview = await call(`${open.url}/`);
    expect(overview.text).toContain('&lt;b&gt;host&lt;/b&gt;');
    expect(overview.text).not.toContain('<b>host</b>');
    for (const page of ['/runs', '/runs/r1', '/events?run=r1', '/poisoned']) {
      expect((await call(`${open.url}${page}`)).status).toBe(200);
    }
  });

  it('streams events over SSE, filtered by run', async () => {
    const ac = new AbortController();
    const res = await fetch(`${open.url}/api/stream?mode=events&run=r1`, { signal: ac.signal });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    let seen = '';
    const read = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        seen += new TextDecoder().decode(value as Uint8Array);
        if (seen.includes('TaskCancelled')) return;
      }
    })();
    // A worker event (another aggregate) must not reach a run-filtered stream.
    await open.ctx.writer.write({
      subject: open.ctx.names.subjects.worker('w1'),
      type: 'WorkerDraining',
      data: { reason: 'shutdown' },
    });
    const cancel = await call<unknown>(`${open.url}/api/tasks/r1/t1/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'not needed' }),
    });
    expect(cancel.status).toBe(200);
    expect(cancel.json).toEqual({ runId: 'r1', taskId: 't1', cancelled: 1 });
    await read;
    ac.abort();
    expect(seen).toContain('event: event');
    expect(seen).toContain('"reason":"not needed"');
    expect(seen).not.toContain('WorkerDraining');
  });

  it('cancels a run (POST /api/runs/:id/cancel) and refuses cross-site posts', async () => {
    const forged = await call(`${open.url}/api/runs/r1/cancel`, {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'content-type': 'application/json' },
    });
    expect(forged.status).toBe(403);
    const res = await call<unknown>(`${open.url}/api/runs/r1/cancel`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ runId: 'r1', cancelled: 1 });
    expect(open.ctx.loop.projection.runs.get('r1')?.snapshot.value).toBe('Cancelled');
    const again = await call(`${open.url}/api/poisoned/r1.t0/retry`, { method: 'POST' });
    expect(again.status).toBe(409);
  });

  it('without a token, refuses requests addressed to another host name (DNS rebinding)', async () => {
    // fetch will not send another Host header, node:http will.
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(`${open.url}/api/overview`, { headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await status('evil.example')).toBe(403);
    expect(await status('localhost:1234')).toBe(200);
  });
});

describe('dashboard with SONAR_HTTP_TOKEN', () => {
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

  it('refuses a missing or bad token on the API, pages, SSE and actions', async () => {
    expect((await call(`${locked.url}/api/overview`)).status).toBe(401);
    expect((await call(`${locked.url}/api/overview`, { headers: bearer('wrong') })).status).toBe(
      401,
    );
    expect((await call(`${locked.url}/api/stream`)).status).toBe(401);
    const page = await call(`${locked.url}/runs`);
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/login?next=%2Fruns');
    const act = await call(`${locked.url}/api/runs/r1/cancel`, { method: 'POST' });
    expect(act.status).toBe(401);
    // The token is never accepted in the URL.
    expect((await call(`${locked.url}/api/overview?token=${TOKEN}`)).status).toBe(401);
  });

  it('accepts the bearer token, and the login cookie (which is not the token)', async () => {
    const ok = await call(`${locked.url}/api/overview`, { headers: bearer(TOKEN) });
    expect(ok.status).toBe(200);
    expect((await call(`${locked.url}/assets/app.js`)).status).toBe(200);

    const bad = await call(`${locked.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: 'wrong', next: '/runs' }).toString(),
    });
    expect(bad.headers.get('location')).toBe('/login?failed=1&next=%2Fruns');
    expect(bad.headers.get('set-cookie')).toBeNull();

    const login = await call(`${locked.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: TOKEN, next: '//evil.example/' }).toString(),
    });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/');
    const cookie = login.headers.get('set-cookie')!;
    expect(cookie).toMatch(/HttpOnly; SameSite=Strict/);
    expect(cookie).not.toContain(TOKEN);
    const session = cookie.split(';')[0]!;
    const page = await call(`${locked.url}/runs`, { headers: { cookie: session } });
    expect(page.status).toBe(200);
    const ac = new AbortController();
    const sse = await fetch(`${locked.url}/api/stream?mode=changes`, {
      headers: { cookie: session },
      signal: ac.signal,
    });
    expect(sse.status).toBe(200);
    ac.abort();
    expect(logLines.join('\n')).not.toContain(TOKEN);
  });
});
