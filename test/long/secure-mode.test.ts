/**
 * Secure mode end to end: a nats-server in operator mode with what `sonar creds init` makes,
 * a backend given the worker signing key, workers that hold only the fleet's bootstrap
 * credential, a client and an operator. Workers enroll, connect as themselves, run a run,
 * renew their short-lived credentials while they work, and one is revoked and cut off while
 * the other keeps working.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { names } from '../../streams/names.js';
import { eventually } from '../helpers/eventually.js';
import { writeRunFile } from '../helpers/run-file.js';
import { securePerFile } from '../helpers/secure-per-file.js';
import { killAll, runSonar, spawnSonar } from '../helpers/sonar-process.js';
import type { SonarProcess } from '../helpers/sonar-process.js';
import { NO_IMDS } from '../helpers/worker-fixtures.js';

// The server is killed and restarted by a test; the fixture stops it for good.
const secure = securePerFile();
let dir: string;
let backend: SonarProcess;
const workers = new Map<string, SonarProcess>();

const FAST = {
  SONAR_PULSE_INTERVAL: '300ms',
  // Above the reconnect that every credential expiry forces (up to 2 s with jitter): the
  // server closes a connection when the JWT it was opened with expires.
  SONAR_PULSE_TTL: '5s',
  SONAR_TICK: '300ms',
  SONAR_LOCK_TTL: '5s',
  SONAR_IMDS_URL: NO_IMDS,
};

function worker(id: string): SonarProcess {
  const p = spawnSonar(
    id,
    ['worker', '--worker-id', id, '--tags', 'sec', '--slots', '2', '--', 'cat'],
    { ...secure().envFor('bootstrap'), ...FAST },
  );
  workers.set(id, p);
  return p;
}

async function submitAndWait(runId: string, tasks: number): Promise<void> {
  const file = await writeRunFile(dir, {
    runId,
    steps: [
      {
        id: 's',
        tags: ['sec'],
        tasks: Array.from({ length: tasks }, (_, i) => ({ id: `t${i}`, input: { i } })),
      },
    ],
  });
  const submit = spawnSonar(`submit ${runId}`, ['submit', file, '--wait'], {
    ...secure().envFor('client'),
    ...FAST,
    // a failure prints its stack
    SONAR_DEBUG: '1',
  });
  // A run that does not end says why: what every process said, not only a test timeout.
  const timer = setTimeout(() => void submit.kill('SIGTERM'), SUBMIT_WAIT_MS);
  const exit = await submit.exited.finally(() => clearTimeout(timer));
  expect(exit.code, submit.killedOnPurpose ? everyoneSaid(submit) : submit.stderr()).toBe(0);
}

const SUBMIT_WAIT_MS = 45_000;

function everyoneSaid(submit: SonarProcess): string {
  const tail = (p: SonarProcess) => p.stderr().slice(-3_000);
  return [
    `submit --wait did not end within ${SUBMIT_WAIT_MS} ms:\n${tail(submit)}`,
    `backend:\n${tail(backend)}`,
    ...[...workers].map(([id, w]) => `${id} (${w.running ? 'running' : 'exited'}):\n${tail(w)}`),
  ].join('\n\n');
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sonar-secure-e2e-'));
  backend = spawnSonar('backend', ['backend'], {
    ...secure().envFor('backend'),
    ...FAST,
    // Short-lived worker credentials, so that renewals happen within the test.
    SONAR_WORKER_CREDENTIAL_TTL: '4s',
  });
  await eventually(() => backend.stderr().includes('backend started') || !backend.running, {
    timeoutMs: 30_000,
  });
  expect(backend.running, backend.stderr()).toBe(true);
}, 60_000);

afterAll(async () => {
  await killAll();
  // SONAR_CHAOS_LOGS=dir keeps every process's log, as the chaos scenarios do.
  const logs = process.env['SONAR_CHAOS_LOGS'];
  if (logs) {
    await mkdir(logs, { recursive: true });
    // backend is unset when the server did not start.
    for (const p of [backend, ...workers.values()].filter(Boolean)) {
      await writeFile(join(logs, `secure-${p.name}-${p.pid}.log`), p.stderr());
    }
  }
  await rm(dir, { recursive: true, force: true });
});

describe('secure mode', () => {
  it('workers enroll with the bootstrap credential, run a run, and renew as they go', async () => {
    const w1 = worker('sec-w1');
    const w2 = worker('sec-w2');
    await eventually(
      () => {
        for (const w of [w1, w2]) {
          expect(w.running, w.stderr()).toBe(true);
          expect(w.stderr()).toContain('connected with its own credential');
          expect(w.stderr()).toContain('worker joined');
        }
      },
      { timeoutMs: 30_000 },
    );
    await submitAndWait('sec-r1', 6);
    // Each credential lives 4 s: after 9 s each worker has renewed and reconnected with
    // the new one at least once, and still works.
    await new Promise((resolve) => setTimeout(resolve, 9_000));
    for (const w of [w1, w2]) {
      expect(w.running, w.stderr()).toBe(true);
      expect(w.stderr().split('credential renewed').length - 1).toBeGreaterThanOrEqual(2);
    }
    await submitAndWait('sec-r2', 4);
  }, 120_000);

  it('an output over the inline limit is staged by its worker and moved into the store by the backend', async () => {
    const blob = 'x'.repeat(100_000);
    const file = await writeRunFile(dir, {
      runId: 'sec-big',
      steps: [
        {
          id: 's',
          tags: ['sec'],
          output: 'json',
          tasks: [0, 1, 2].map((i) => ({ id: `t${i}`, input: { i, blob } })),
        },
      ],
    });
    const client = { ...secure().envFor('client'), ...FAST };
    const submitted = await runSonar('submit sec-big', ['submit', file, '--wait'], client);
    expect(submitted.code, submitted.stderr + backend.stderr().slice(-3_000)).toBe(0);
    const r = await runSonar('results sec-big', ['results', 'sec-big', '--json'], client);
    expect(r.code, r.stderr).toBe(0);
    const list = JSON.parse(r.stdout) as { results: { taskId: string; bytes: number }[] };
    expect(list.results.map((v) => v.taskId)).toEqual(['t0', 't1', 't2']);
    for (const [i, v] of list.results.entries()) {
      expect(v.bytes).toBeGreaterThan(16 * 1024);
      // The whole output, read back from the object store with the client's credential.
      const one = await runSonar(
        `results sec-big t${i}`,
        ['results', 'sec-big', '--task', v.taskId, '--json'],
        client,
      );
      expect(one.code, one.stderr).toBe(0);
      expect((JSON.parse(one.stdout) as { json: unknown }).json).toEqual({ i, blob });
    }
    // Nothing is left staged once moved.
    const nc = await secure().connectAs('backend');
    try {
      const info = await (await jetstreamManager(nc)).streams.info(names().streams.staging);
      expect(info.state.messages).toBe(0);
    } finally {
      await nc.close();
    }
  }, 90_000);

  it('an outage longer than a credential lives is waited out: workers enroll again', async () => {
    await secure().server.kill('SIGTERM');
    // Every worker credential (4 s) expires while the server is down.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    await secure().server.restart();
    await eventually(
      () => {
        for (const id of ['sec-w1', 'sec-w2']) {
          const w = workers.get(id)!;
          expect(w.running, w.stderr()).toBe(true);
          expect(w.stderr()).toMatch(/enrolled again|credential renewed/);
        }
      },
      { timeoutMs: 30_000 },
    );
    await submitAndWait('sec-r-outage', 4);
    for (const id of ['sec-w1', 'sec-w2']) expect(workers.get(id)!.running).toBe(true);
  }, 90_000);

  it('a revoked worker is disconnected and declared Lost, and the other keeps working', async () => {
    const r = await runSonar('revoke', ['revoke', 'sec-w1', '--json'], {
      ...secure().envFor('operator'),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ workerId: 'sec-w1', revoked: true, pushed: true });
    // Cut off at once: the server closes its connection and refuses its credential, and
    // the worker ends as Failed.
    const w1 = workers.get('sec-w1')!;
    const exit = await Promise.race([
      w1.exited,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`still running:\n${w1.stderr().slice(-4000)}`)), 30_000),
      ),
    ]);
    expect(exit.code, w1.stderr()).not.toBe(0);
    expect(w1.stderr()).toMatch(/authorization|revoked|conflict/i);
    // It ends by itself: its connection, dialling with a refused credential, is closed too.
    expect(w1.stderr()).not.toMatch(/sonar: still open/);
    // Nor does it spend its stop grace on a registry key it can no longer reach.
    expect(w1.stderr()).toMatch(/registry key left to the backend/);
    expect(w1.stderr()).not.toMatch(/stop grace ran out|registry key not deleted/);
    const w2 = workers.get('sec-w2')!;
    expect(w2.running, w2.stderr()).toBe(true);
    await submitAndWait('sec-r3', 4);
    // Whatever it would say now, it is not heard: its id is refused.
    const status = await runSonar('status', ['status', '--json'], secure().envFor('operator'));
    expect(status.code, status.stderr).toBe(0);
    const live = (JSON.parse(status.stdout) as { workers: { workerId: string }[] }).workers;
    expect(live.map((w) => w.workerId)).toEqual(['sec-w2']);
  }, 90_000);
});
