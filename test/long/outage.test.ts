/**
 * Outages are not deaths: what a backend says of itself while its server is away
 * (`/readyz` false, `/healthz` true), what it says when the server refused it for good
 * (`/healthz` false), and a reconciler that waits a pulse TTL of steady contact after an
 * outage before it judges any worker by its missing registry key.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/backend/backend.js';
import { finalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { reconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import { httpComponent } from '../../src/http/http-component.js';
import { eventually } from '../helpers/eventually.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { startBackend } from '../helpers/test-backend.js';
import { NO_IMDS, eventsOf, killWorkers, spawnWorker } from '../helpers/worker-fixtures.js';
import type { WorkerProcess } from '../helpers/worker-fixtures.js';

// Not a per-file server: each test kills its own (the outage under test), some with a config
// of their own, and a fresh one per test keeps one test's outage out of the next.
let server: NatsServer | undefined;
let backend: Backend | undefined;
let dir: string | undefined;

afterEach(async () => {
  await killWorkers();
  await backend?.stop();
  backend = undefined;
  await server?.stop();
  server = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A backend that owns its connection (so it reconnects as in production), with HTTP. */
async function startOwnBackend(env: Record<string, string>, reconciler = false) {
  const tb = await startBackend({
    env: { SONAR_IMDS_URL: NO_IMDS, SONAR_HTTP_PORT: '0', ...env },
    components: [...(reconciler ? [reconcilerLoop()] : []), finalizerPool(), httpComponent()],
  });
  backend = tb.backend;
  const get = async (path: string) => {
    const r = await fetch(`${tb.url}${path}`);
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const text = async (path: string) => (await fetch(`${tb.url}${path}`)).text();
  return { backend, get, text };
}

describe('a NATS outage', () => {
  it('makes /readyz false and leaves /healthz true; /readyz is true again within 10 s of the return', async () => {
    server = await startNatsServer();
    const { get, text } = await startOwnBackend({ SONAR_NATS_URL: server.url });
    await eventually(async () => (await get('/readyz')).status === 200, { message: 'ready' });
    await server.kill('SIGKILL');
    await eventually(async () => (await get('/readyz')).status === 503, {
      message: 'not ready while the server is down',
    });
    const down = await get('/readyz');
    expect(down.body['checks']).toMatchObject({ connected: false });
    // Down for a while: still live, since a restart would not bring the server back.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect((await get('/healthz')).status).toBe(200);
    await server.restart();
    const back = performance.now();
    await eventually(async () => (await get('/readyz')).status === 200, {
      timeoutMs: 10_000,
      message: 'ready again within 10 s of the return',
    });
    expect(performance.now() - back).toBeLessThan(10_000);
    expect((await get('/healthz')).status).toBe(200);
    const metrics = await text('/metrics');
    expect(metrics).toMatch(/^sonar_nats_disconnects_total 1$/m);
    expect(metrics).toMatch(/^sonar_nats_reconnects_total 1$/m);
    expect(metrics).toMatch(/^sonar_nats_connected 1$/m);
  });

  it('does not make the reconciler declare Lost a worker whose key expired meanwhile', async () => {
    server = await startNatsServer();
    const { backend: b } = await startOwnBackend(
      {
        SONAR_NATS_URL: server.url,
        SONAR_PULSE_INTERVAL: '500ms',
        // Long enough that the resumed worker has a wide margin to put its key back before
        // the floor (a TTL of steady contact) passes, on a machine loaded by other suites.
        SONAR_PULSE_TTL: '15s',
        SONAR_TICK: '500ms',
        SONAR_LOCK_TTL: '30s',
      },
      true,
    );
    const ctx = b.ctx;
    const w = spawnWorker(
      {
        SONAR_NATS_URL: server.url,
        SONAR_PREFIX: ctx.names.prefix,
        SONAR_IMDS_URL: NO_IMDS,
      },
      ['--worker-id', 'w1', '--tags', 'a', '--slots', '1'],
    );
    await eventually(() => ctx.loop.projection.workers.get('w1')?.snapshot.value === 'Active', {
      timeoutMs: 15_000,
      message: 'w1 joined',
    });
    await eventually(() => b.ctx.loop.projection.leader?.nodeId === ctx.nodeId, {
      message: 'this backend leads',
    });
    // Longer than the pulse TTL (the key expires on the restarted server) and shorter than
    // the lock TTL (the leader keeps its lock: no new term restarts the floor for it).
    await server.kill('SIGKILL');
    // The worker stays still a little past the server's return: a reconciler that judged
    // at once would find its key gone.
    w.child.kill('SIGSTOP');
    await new Promise((resolve) => setTimeout(resolve, 17_000));
    await server.restart();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    w.child.kill('SIGCONT');
    await eventually(async () => (await ctx.registry.live()).some((e) => e.workerId === 'w1'), {
      timeoutMs: 30_000,
      message: "w1's key is back",
    }).catch((err: unknown) => {
      throw new Error(`${String(err)}\nworker:\n${w.stderr().slice(-4_000)}`);
    });
    // Well past the floor: nothing judged the worker.
    await new Promise((resolve) => setTimeout(resolve, 16_000));
    const workerEvents = (await eventsOf(ctx, ctx.names.subjects.worker('w1'))).map((e) => e.type);
    expect(workerEvents, w.stderr().slice(-3_000)).toEqual(['WorkerJoined']);
    expect(w.child.exitCode).toBeNull();
    expect(ctx.loop.projection.workers.get('w1')?.snapshot.value).toBe('Active');
  }, 120_000);
});

describe('an outage while a worker starts', () => {
  it('is waited out: the worker warns on each try and joins once the server answers again', async () => {
    server = await startNatsServer();
    const { backend: b } = await startOwnBackend({ SONAR_NATS_URL: server.url });
    const ctx = b.ctx;
    const nc = await connect({ servers: server.url });
    try {
      // The worker is stopped as soon as its join is sent, and the server as soon as the
      // backend answered it: the worker reads its answer with nothing left to ask the rest.
      const spawned: { worker?: WorkerProcess } = {};
      let serverStopped = false;
      nc.subscribe(ctx.names.subjects.workerApi('w1', 'join'), {
        max: 1,
        callback: () => {
          spawned.worker?.child.kill('SIGSTOP');
        },
      });
      nc.subscribe('_INBOX.>', {
        callback: (_err, msg) => {
          if (serverStopped || !msg.string().includes('pulseIntervalMs')) return;
          serverStopped = true;
          process.kill(server!.pid, 'SIGSTOP');
          spawned.worker?.child.kill('SIGCONT');
        },
      });
      await nc.flush();
      const w = spawnWorker(
        { SONAR_NATS_URL: server.url, SONAR_PREFIX: ctx.names.prefix, SONAR_IMDS_URL: NO_IMDS },
        ['--worker-id', 'w1', '--tags', 'a', '--slots', '1'],
      );
      spawned.worker = w;
      await eventually(() => w.stderr().includes('not answered while starting'), {
        timeoutMs: 30_000,
        message: 'the worker says it waits',
      }).catch((err: unknown) => {
        throw new Error(`${String(err)}\nworker:\n${w.stderr().slice(-4_000)}`);
      });
      // Past the JetStream request timeout more than once: the worker waits on.
      await new Promise((resolve) => setTimeout(resolve, 7_000));
      expect(w.child.exitCode, w.stderr().slice(-3_000)).toBeNull();
      process.kill(server.pid, 'SIGCONT');
      await eventually(() => w.stderr().includes('worker joined'), {
        timeoutMs: 30_000,
        message: 'the worker ends its start',
      }).catch((err: unknown) => {
        throw new Error(`${String(err)}\nworker:\n${w.stderr().slice(-4_000)}`);
      });
      await eventually(async () => (await ctx.registry.live()).some((e) => e.workerId === 'w1'), {
        message: "w1's key is there",
      });
      expect(w.child.exitCode).toBeNull();
      const steps = [...w.stderr().matchAll(/"step":"([^"]+)"/g)].map((m) => m[1]);
      expect(steps.length).toBeGreaterThanOrEqual(2);
    } finally {
      if (server.running) process.kill(server.pid, 'SIGCONT');
      await nc.close();
    }
  }, 90_000);
});

describe('a connection the server refused for good', () => {
  it('fails /healthz', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sonar-auth-'));
    const conf = join(dir, 'server.conf');
    const configWith = (password: string) =>
      `jetstream { store_dir: ${JSON.stringify(join(dir!, 'js'))} }\n` +
      `authorization { users: [ { user: sonar, password: ${password} } ] }\n`;
    await writeFile(conf, configWith('first'));
    server = await startNatsServer({ config: conf, storeDir: join(dir, 'js') });
    const { get } = await startOwnBackend({
      SONAR_NATS_URL: server.url,
      SONAR_NATS_USER: 'sonar',
      SONAR_NATS_PASSWORD: 'first',
    });
    expect((await get('/healthz')).status).toBe(200);
    // The password changes under the running backend: the reload drops it, and every
    // reconnect is refused with an authorization error.
    await writeFile(conf, configWith('second'));
    process.kill(server.pid, 'SIGHUP');
    await eventually(async () => (await get('/healthz')).status === 503, {
      timeoutMs: 30_000,
      message: '/healthz fails once the connection closed for good',
    });
    expect((await get('/healthz')).body).toMatchObject({
      ok: false,
      problems: { connection: 'the NATS connection closed for good' },
    });
    expect((await get('/readyz')).status).toBe(503);
  }, 60_000);
});
