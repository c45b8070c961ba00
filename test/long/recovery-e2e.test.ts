import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import { ProjectionLoop } from '../../src/backend/projection/projection-loop.js';
import { SonarClient } from '../../src/client/client.js';
import { silentLogger } from '../../src/log.js';
import { eventually } from '../helpers/eventually.js';
import { startSecureNats } from '../helpers/secure-nats.js';
import type { SecureNats } from '../helpers/secure-nats.js';
import { freshPrefix } from '../helpers/topology.js';
import {
  killWorkers,
  NO_IMDS,
  ROOT,
  runFileOf,
  SONAR_BIN,
  spawnShellWorker,
  spawnWorker,
  startTestBackend,
} from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';

/**
 * Recovery end to end, with real backend and worker processes and real signals:
 * a SIGKILLed leader, a SIGKILLed worker, a restarted backend.
 *
 * In secure mode, each test on a server of its own whose credentials are made for the
 * test's prefix: backends hold the backend's credential and the worker signing key, workers
 * only the fleet's bootstrap credential (they enroll and connect as themselves), the test
 * submits as a client and follows the log as an operator.
 */
let secure: SecureNats | undefined;
const conns: NatsConnection[] = [];
const backends = new Set<ChildProcess>();
let tb: TestBackend | undefined;
const watchers: ProjectionLoop[] = [];

afterEach(async () => {
  await killWorkers();
  for (const b of backends) b.kill('SIGKILL');
  backends.clear();
  await tb?.stop();
  tb = undefined;
  for (const w of watchers.splice(0)) await w.stop();
  for (const c of conns.splice(0)) await c.close().catch(() => {});
  await secure?.stop();
  secure = undefined;
});

/** A secure server for `prefix`, stopped after the test. */
async function secureFor(prefix: string): Promise<SecureNats> {
  secure = await startSecureNats({ prefix });
  return secure;
}

/** The test's connection as `role` (closed after the test). */
async function connectAs(
  s: SecureNats,
  role: 'backend' | 'client' | 'operator',
): Promise<NatsConnection> {
  const nc = await s.connectAs(role);
  conns.push(nc);
  return nc;
}

/** The settings that make a backend's environment a worker's: no backend secret, the bootstrap creds. */
function workerEnvOf(env: Record<string, string>, s: SecureNats): Record<string, string> {
  const {
    SONAR_WORKER_SIGNING_KEY: _signing,
    SONAR_WORKER_ACCOUNT_JWT: _workersAccount,
    SONAR_NATS_OPERATOR_SIGNING_KEY: _operator,
    SONAR_NATS_SYS_CREDS: _sys,
    ...rest
  } = env;
  return { ...rest, ...s.envFor('bootstrap') };
}

/** A live projection of one prefix, folded in the test process from the stream. */
async function watch(nc: NatsConnection, prefix: string): Promise<ProjectionLoop> {
  const loop = new ProjectionLoop(new EventStore(nc, names(prefix)), silentLogger);
  await loop.start();
  watchers.push(loop);
  return loop;
}

/** `node bin/sonar.js backend` on `env`; resolves with its node id once it has started. */
async function spawnBackend(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; nodeId: string; stderr: () => string }> {
  const child = spawn(process.execPath, [SONAR_BIN, 'backend'], {
    cwd: ROOT,
    env: { ...process.env, ...env, SONAR_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  backends.add(child);
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const nodeId = await eventually(
    () => {
      const line = err.split('\n').find((l) => l.includes('"backend started"'));
      return line ? (JSON.parse(line) as { nodeId: string }).nodeId : false;
    },
    { timeoutMs: 20_000, message: 'backend started' },
  );
  return { child, nodeId, stderr: () => err };
}

const shortEnv = (prefix: string): Record<string, string> => ({
  SONAR_PREFIX: prefix,
  SONAR_TICK: '200ms',
  SONAR_LOCK_TTL: '2s',
  SONAR_PULSE_INTERVAL: '300ms',
  SONAR_PULSE_TTL: '2s',
  SONAR_ORPHAN_AGE: '3s',
  SONAR_DRAIN_GRACE: '2s',
  SONAR_IMDS_URL: NO_IMDS,
});

describe('recovery with real processes', () => {
  it('a leader SIGKILLed mid-run is replaced by the standby, and the run completes', async () => {
    const prefix = freshPrefix();
    const s = await secureFor(prefix);
    // The leader is the fault here, not the workers: a pulse TTL that a loaded CI machine
    // cannot miss, or a stalled worker is (rightly) fenced off and, unsupervised, the run stalls.
    const env = {
      ...shortEnv(prefix),
      SONAR_PULSE_INTERVAL: '500ms',
      SONAR_PULSE_TTL: '5s',
    };
    const a = await spawnBackend({ ...env, ...s.envFor('backend') });
    const b = await spawnBackend({ ...env, ...s.envFor('backend') });
    const view = await watch(await connectAs(s, 'operator'), prefix);
    const workers = [0, 1].map(() =>
      spawnShellWorker({ ...env, ...s.envFor('bootstrap') }, 4, 'sleep 0.05; echo ok'),
    );
    const client = new SonarClient(await connectAs(s, 'client'), { prefix });
    await client.submit(runFileOf('lead', [{ id: 's1', tags: ['linux'], count: 200 }]));
    const leader = await eventually(() => view.projection.leader?.nodeId ?? false, {
      timeoutMs: 20_000,
    });
    const [victim, standby] = leader === a.nodeId ? [a, b] : [b, a];
    await eventually(() => view.projection.stepIndex.get('lead.s1')!.counts.Succeeded >= 20, {
      timeoutMs: 30_000,
    });
    victim.child.kill('SIGKILL');
    await eventually(() => view.projection.leader?.nodeId === standby.nodeId, {
      timeoutMs: 20_000,
      message: 'the standby elected',
    });
    await eventually(() => view.projection.runs.get('lead')?.snapshot.value === 'Succeeded', {
      timeoutMs: 60_000,
      message: 'the run succeeded',
    }).catch((err: unknown) => {
      // Where the run stalled: the step's counts and what the standby and the workers said.
      const counts = JSON.stringify(view.projection.stepIndex.get('lead.s1')?.counts);
      const said = [standby.stderr(), ...workers.map((w) => w.stderr())]
        .map((e) =>
          e
            .split('\n')
            .filter((l) => /"(warn|error)"/.test(l))
            .slice(-15)
            .join('\n'),
        )
        .join('\n---\n');
      throw new Error(`${String(err)}\ncounts ${counts}\n${said}`);
    });
  }, 150_000);

  it('a worker SIGKILLed mid-task: the task completes elsewhere on a new attempt; the old one is refused', async () => {
    const env = {
      SONAR_ORPHAN_AGE: '3s',
      SONAR_PULSE_INTERVAL: '500ms',
      SONAR_PULSE_TTL: '2s',
      SONAR_TICK: '200ms',
    };
    const prefix = freshPrefix();
    const s = await secureFor(prefix);
    // The backend in this process, on a connection of the backend's role, with its secrets.
    const nc = await connectAs(s, 'backend');
    tb = await startTestBackend(
      s.server.url,
      nc,
      { ...env, ...s.envFor('backend'), SONAR_PREFIX: prefix },
      { reconciler: true },
    );
    const { ctx } = tb;
    const workerEnv = workerEnvOf(tb.env, s);
    const cmd = ['--', 'sh', '-c', 'sleep 1.5; echo done'];
    const first = spawnWorker(workerEnv, [
      '--tags',
      'linux',
      '--slots',
      '1',
      '--worker-id',
      'wa',
      ...cmd,
    ]);
    const client = new SonarClient(await connectAs(s, 'client'), { prefix });
    await client.submit(runFileOf('kill', [{ id: 's1', tags: ['linux'], count: 1 }]));
    const task = () => ctx.loop.projection.tasks.get('kill.t0')!.snapshot;
    await eventually(() => task().value === 'Running' && task().context.workerId === 'wa', {
      timeoutMs: 20_000,
    });
    const oldAttemptId = task().context.attemptId!;
    first.child.kill('SIGKILL');
    spawnWorker(workerEnv, ['--tags', 'linux', '--slots', '1', '--worker-id', 'wb', ...cmd]);
    await eventually(() => task().value === 'Succeeded', { timeoutMs: 40_000 });
    expect(task().context.attempt).toBe(2);
    expect(task().context.workerId).toBe('wb');
    const events = await ctx.store.readAggregate(ctx.names.subjects.task('kill', 't0'));
    expect(
      events
        .filter((e) => e.type === 'TaskRequeued')
        .map((e) => (e.data as { reason: string }).reason),
    ).toEqual(['worker-lost']);
    // The old attempt's late result is refused, and nothing is appended. It comes as `wa`
    // would send it: on wa's own subject, over a connection whose credential is minted for
    // the id `wa` by the worker signing key (what the dead worker held; its seed died with it).
    const before = events.length;
    const asWa = await s.connectAsWorker(await s.mintWorker('wa'));
    conns.push(asWa);
    const reply = await asWa.request(
      ctx.names.subjects.workerApi('wa', 'result'),
      JSON.stringify({
        runId: 'kill',
        taskId: 't0',
        attemptId: oldAttemptId,
        token: 'a'.repeat(64),
        workerId: 'wa',
        output: { inline: Buffer.from('late').toString('base64'), bytes: 4 },
      }),
      { timeout: 5_000 },
    );
    expect(reply.json<{ error: { code: string } }>().error.code).toMatch(/stale_attempt|conflict/);
    expect(await ctx.store.readAggregate(ctx.names.subjects.task('kill', 't0'))).toHaveLength(
      before,
    );
  });

  it('a restarted backend does not requeue the tasks of live workers', async () => {
    const prefix = freshPrefix();
    const s = await secureFor(prefix);
    const env = { ...shortEnv(prefix), SONAR_ORPHAN_AGE: '2s' };
    const first = await spawnBackend({ ...env, ...s.envFor('backend') });
    const operator = await connectAs(s, 'operator');
    const view = await watch(operator, prefix);
    spawnShellWorker({ ...env, ...s.envFor('bootstrap') }, 2, 'sleep 5; echo done');
    const client = new SonarClient(await connectAs(s, 'client'), { prefix });
    await client.submit(runFileOf('restart', [{ id: 's1', tags: ['linux'], count: 2 }]));
    await eventually(() => view.projection.stepIndex.get('restart.s1')!.counts.Running === 2, {
      timeoutMs: 20_000,
    });
    first.child.kill('SIGTERM');
    await new Promise((resolve) => first.child.once('exit', resolve));
    await spawnBackend({ ...env, ...s.envFor('backend') });
    await eventually(() => view.projection.runs.get('restart')?.snapshot.value === 'Succeeded', {
      timeoutMs: 40_000,
    });
    for (const t of ['t0', 't1']) {
      const snap = view.projection.tasks.get(`restart.${t}`)!.snapshot;
      expect(snap.context.attempt).toBe(1);
    }
    const store = new EventStore(operator, names(prefix));
    const requeues = (
      await store.readAggregate(names(prefix).subjects.task('restart', '*'))
    ).filter((e) => e.type === 'TaskRequeued');
    expect(requeues).toEqual([]);
  });
});
