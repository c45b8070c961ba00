/**
 * Access control, for real (issue 7): a nats-server running deploy/nats/accounts.conf, a
 * backend, workers and CLI verbs each with its own role's credential. Shows that each role
 * does its work and nothing it must not, that attempt tokens fence one worker off another's
 * task, and that no token or password ever reaches a log.
 */
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { names } from '../../streams/names.js';
import { ApiClient, isApiError } from '../../src/worker/api-client.js';
import { eventually } from '../helpers/eventually.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { killAll, runSonar, spawnSonar } from '../helpers/sonar-process.js';
import type { SonarProcess } from '../helpers/sonar-process.js';
import { NO_IMDS, ROOT } from '../helpers/worker-fixtures.js';

type Role = 'backend' | 'worker' | 'client' | 'operator' | 'supervisor';
const ROLES: Role[] = ['backend', 'worker', 'client', 'operator', 'supervisor'];

let dir: string;
let server: NatsServer;
/** Each role's password, read from the very file under test. */
const passwords = new Map<string, string>();
const conns: NatsConnection[] = [];
/** Every process and CLI run, for the log check at the end. */
const outputs: { name: string; text: () => string }[] = [];
/** Every attempt token the backend published, seen on the wire by the backend credential. */
const tokens = new Set<string>();
let backend: SonarProcess;
const n = names('sonar');

const envOf = (role: Role): Record<string, string> => ({
  SONAR_NATS_URL: server.url,
  SONAR_NATS_USER: role,
  SONAR_NATS_PASSWORD: passwords.get(role)!,
  // Debug: the most a process ever logs, so a leak would show.
  SONAR_LOG_LEVEL: 'debug',
  SONAR_PULSE_INTERVAL: '300ms',
  SONAR_PULSE_TTL: '1500ms',
  // A lock TTL that survives a loaded machine: a 1 s lease can flap under load.
  SONAR_TICK: '500ms',
  SONAR_LOCK_TTL: '5s',
  SONAR_IMDS_URL: NO_IMDS,
});

async function connectAs(role: Role): Promise<NatsConnection> {
  const nc = await connect({ servers: server.url, user: role, pass: passwords.get(role)! });
  conns.push(nc);
  return nc;
}

function spawnAs(role: Role, name: string, args: string[]): SonarProcess {
  const p = spawnSonar(name, args, envOf(role));
  outputs.push({ name, text: () => p.stderr() + p.stdout() });
  return p;
}

/** Runs one CLI verb to its end with a role's credential. */
async function cli(role: Role, args: string[]) {
  const r = await runSonar(`${role}: sonar ${args.join(' ')}`, args, envOf(role));
  outputs.push({ name: `${role} ${args[0]}`, text: () => r.stderr + r.stdout });
  return r;
}

const messagesIn = async (stream: string): Promise<number> => {
  const jsm = await jetstreamManager(conns[0]!);
  return (await jsm.streams.info(stream)).state.last_seq;
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sonar-acl-'));
  // The accounts file as shipped; `include` paths are relative to the including file.
  await copyFile(join(ROOT, 'deploy', 'nats', 'accounts.conf'), join(dir, 'accounts.conf'));
  const text = await readFile(join(dir, 'accounts.conf'), 'utf8');
  for (const m of text.matchAll(/user: (\w+)\s+password: "([^"]+)"/g)) passwords.set(m[1]!, m[2]!);
  expect([...passwords.keys()].sort()).toEqual([...ROLES].sort());
  await mkdir(join(dir, 'js'));
  await writeFile(
    join(dir, 'server.conf'),
    `jetstream { store_dir: ${JSON.stringify(join(dir, 'js'))} }\ninclude ./accounts.conf\n`,
  );
  server = await startNatsServer({ config: join(dir, 'server.conf'), storeDir: join(dir, 'js') });
  backend = spawnAs('backend', 'backend', ['backend']);
  await eventually(() => backend.stderr().includes('backend started') || !backend.running, {
    timeoutMs: 30_000,
  });
  expect(backend.running, backend.stderr()).toBe(true);
  // The backend credential sees dispatch messages on the wire: collect every token.
  const bnc = await connectAs('backend');
  bnc.subscribe(n.subjects.dispatchAll, {
    callback: (_err, m) => {
      const token = (m.json<{ token?: unknown }>() ?? {}).token;
      if (typeof token === 'string') tokens.add(token);
    },
  });
}, 60_000);

afterAll(async () => {
  await killAll();
  await Promise.all(conns.map((c) => c.close().catch(() => {})));
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('access control with deploy/nats/accounts.conf', () => {
  it('each role does its own work: a client submits, workers run it, an operator reads', async () => {
    const worker = spawnAs('worker', 'worker-1', [
      'worker',
      '--worker-id',
      'acl-w1',
      '--tags',
      'acl',
      '--slots',
      '2',
      '--',
      'cat',
    ]);
    await eventually(() => worker.stderr().includes('worker joined'), { timeoutMs: 30_000 });
    const runFile = join(dir, 'run.json');
    await writeFile(
      runFile,
      JSON.stringify({
        runId: 'acl',
        steps: [
          { id: 's', tags: ['acl'], tasks: [1, 2, 3].map((i) => ({ id: `t${i}`, input: { i } })) },
        ],
      }),
    );
    const submitted = await cli('client', ['submit', runFile, '--wait', '--json']);
    const warnings = backend
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"warn"') || l.includes('"error"'))
      .slice(-5);
    expect(submitted.code, `${submitted.stderr}\n${warnings.join('\n')}`).toBe(0);
    expect(submitted.stdout).toMatch(/"state":"Succeeded"/);

    const exported = await cli('operator', ['export', '--run', 'acl']);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout.trim().split('\n').length).toBeGreaterThan(10);
    const status = await cli('operator', ['status', '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(tokens.size).toBeGreaterThanOrEqual(3);
  }, 120_000);

  it('only the backend credential reaches the dashboard sessions bucket', async () => {
    const own = await new Kvm(await connectAs('backend')).open(n.buckets.sessions);
    await own.put('acl-session', '{"createdAt":0}');
    expect((await own.get('acl-session'))?.string()).toBe('{"createdAt":0}');
    for (const role of ['operator', 'worker', 'client'] as const) {
      const nc = await connectAs(role);
      const read = async () => {
        const kv = await new Kvm(jetstream(nc, { timeout: 2_000 })).open(n.buckets.sessions);
        return kv.get('acl-session');
      };
      await expect(read(), role).rejects.toThrow();
      nc.publish(`$KV.${n.buckets.sessions}.forged`, '{"createdAt":0}');
      await nc.flush();
    }
    await own.delete('acl-session');
    expect(await own.get('forged')).toBeNull();
  });

  it('a worker credential cannot append events or publish dispatch messages', async () => {
    const nc = await connectAs('worker');
    const events = await messagesIn(n.streams.events);
    const dispatch = await messagesIn(n.streams.dispatch);
    const forged = JSON.stringify({ id: 'forged', type: 'TaskCreated', v: 1, data: {} });
    await expect(
      jetstream(nc).publish(n.subjects.task('acl', 'forged'), forged, { timeout: 2_000 }),
    ).rejects.toThrow();
    nc.publish(n.subjects.dispatch('acl'), JSON.stringify({ runId: 'acl', token: 'x' }));
    await nc.flush();
    // Nor ask the backend for what only clients and supervisors may ask.
    for (const verb of ['submit.begin', 'cancel', 'exited']) {
      await expect(
        nc.request(n.subjects.api(verb), '{}', { timeout: 2_000 }),
        verb,
      ).rejects.toThrow();
    }
    expect(await messagesIn(n.streams.events)).toBe(events);
    expect(await messagesIn(n.streams.dispatch)).toBe(dispatch);
    // While its own verbs work: a join is answered.
    const api = new ApiClient(nc, n, { retryForMs: 0 });
    const joined = await api.request('join', {
      workerId: 'acl-w2',
      host: 'test',
      tags: ['acl'],
      slots: 1,
    });
    expect(joined).toMatchObject({ stream: n.streams.dispatch });
  });

  it('an operator credential reads but cannot submit or cancel', async () => {
    const nc = await connectAs('operator');
    const events = await messagesIn(n.streams.events);
    // Raw requests: the server refuses the publish at once (a permissions violation). The
    // CLI's ApiClient would retry that for 30 s as if it were a lost reply (README: known).
    const denied = async (verb: string, body: unknown): Promise<string> => {
      const err: unknown = await nc
        .request(n.subjects.api(verb), JSON.stringify(body), { timeout: 2_000 })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err, verb).toBeInstanceOf(Error);
      return String((err as Error).message);
    };
    expect(
      await denied('submit.begin', { runId: 'op', hash: 'h', steps: [], taskCount: 0 }),
    ).toMatch(/Permissions Violation for Publish to "sonar\.api\.submit\.begin"/);
    expect(await denied('cancel', { runId: 'acl' })).toMatch(/Permissions Violation/);
    expect(await denied('exited', { workerId: 'acl-w1' })).toMatch(/Permissions Violation/);
    // Nor write through JetStream or KV directly.
    await expect(
      jetstream(nc).publish(n.subjects.run('op'), '{}', { timeout: 2_000 }),
    ).rejects.toThrow();
    expect(await messagesIn(n.streams.events)).toBe(events);
    // While it reads: status over the same credential, through the CLI.
    const status = await cli('operator', ['status', '--run', 'acl', '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/Succeeded/);
  });

  it("attempt tokens stop a worker from reporting another worker's task", async () => {
    const slow = spawnAs('worker', 'worker-slow', [
      'worker',
      '--worker-id',
      'acl-slow',
      '--tags',
      'slow',
      '--',
      'sleep',
      '30',
    ]);
    await eventually(() => slow.stderr().includes('worker joined'), { timeoutMs: 30_000 });
    const client = await connectAs('client');
    await new ApiClient(client, n).request('submit.begin', {
      runId: 'fence',
      hash: 'h',
      steps: [{ id: 's', tags: ['slow'], taskCount: 1 }],
      taskCount: 1,
    });
    await new ApiClient(client, n).request('submit.tasks', {
      runId: 'fence',
      stepId: 's',
      tasks: [{ id: 't' }],
    });
    await new ApiClient(client, n).request('submit.commit', { runId: 'fence' });
    // The attempt id is in the log; the token is only in the dispatch message to acl-slow.
    const bnc = conns[0]!;
    const started = await eventually(
      async () => {
        const jsm = await jetstreamManager(bnc);
        const m = await jsm.streams.getMessage(n.streams.events, {
          last_by_subj: n.subjects.task('fence', 't'),
        });
        const e = m?.json<{ type: string; data: { attemptId: string } }>();
        return e?.type === 'TaskStarted' ? e.data : false;
      },
      { timeoutMs: 30_000 },
    );
    const intruder = new ApiClient(await connectAs('worker'), n, { retryForMs: 0 });
    await intruder.request('join', {
      workerId: 'acl-intruder',
      host: 'x',
      tags: ['slow'],
      slots: 1,
    });
    const forge = (workerId: string) =>
      intruder.request('result', {
        runId: 'fence',
        taskId: 't',
        attemptId: started.attemptId,
        token: 'guessed-token',
        workerId,
        output: { inline: '', bytes: 0 },
      });
    for (const workerId of ['acl-intruder', 'acl-slow']) {
      const err: unknown = await forge(workerId).catch((e: unknown) => e);
      expect(isApiError(err, 'invalid_token'), String(err)).toBe(true);
    }
    // The task is still the slow worker's, still running.
    const jsm = await jetstreamManager(bnc);
    const last = await jsm.streams.getMessage(n.streams.events, {
      last_by_subj: n.subjects.task('fence', 't'),
    });
    expect(last?.json<{ type: string }>().type).toBe('TaskStarted');
    await new ApiClient(client, n).request('cancel', { runId: 'fence' });
  });

  it('a worker whose registry key vanished reads it, puts it back and asks with its own credential; declared Lost, it exits', async () => {
    const w = spawnAs('worker', 'worker-fenced', [
      'worker',
      '--worker-id',
      'acl-fenced',
      '--tags',
      'fenced',
      '--',
      'cat',
    ]);
    await eventually(() => w.stderr().includes('worker joined'), { timeoutMs: 30_000 });
    const kv = await new Kvm(conns[0]!).open(n.buckets.workers);
    // As if its TTL ran out in an outage: the compare-and-set of its next pulse loses, it
    // reads the key (a permission a worker needs for that), finds it gone, creates it again
    // and repeats its join, which is answered `ok`: it carries on.
    await kv.delete('acl-fenced');
    await eventually(() => w.stderr().includes('still joined, carrying on'), {
      timeoutMs: 30_000,
    });
    expect((await kv.get('acl-fenced'))?.operation).toBe('PUT');
    // Declared gone by its supervisor's report (WorkerLost, then the key deleted): the next
    // pulse's question is answered `conflict`, and it exits.
    const sup = await connectAs('supervisor');
    await new ApiClient(sup, n).request('exited', { workerId: 'acl-fenced' });
    const exit = await w.exited;
    expect(exit.code, w.stderr()).toBe(1);
    expect(w.stderr()).toMatch(/worker acl-fenced is Lost: its registry key vanished/);
    expect(w.stderr()).not.toMatch(/Permissions Violation/);
  });

  it('a supervisor runs its workers and reports their exits, and no more', async () => {
    // `sonar workers` and its children share the supervisor credential.
    const sup = spawnAs('supervisor', 'supervisor', [
      'workers',
      '--count',
      '1',
      '--tags',
      'acl',
      '--',
      'cat',
    ]);
    await eventually(() => /worker \S+ started \(pid (\d+)/.test(sup.stdout()), {
      timeoutMs: 30_000,
    });
    await eventually(() => sup.stderr().includes('worker joined'), { timeoutMs: 30_000 });
    const pid = Number(/worker \S+ started \(pid (\d+)/.exec(sup.stdout())![1]);
    // A child dies: the supervisor's `exited` report is answered (not refused).
    process.kill(pid, 'SIGKILL');
    await eventually(() => sup.stdout().includes('sonar.api.exited answered'), {
      timeoutMs: 30_000,
    });
    // But a supervisor cannot submit, cancel or append.
    const nc = await connectAs('supervisor');
    for (const verb of ['submit.begin', 'cancel']) {
      await expect(
        nc.request(n.subjects.api(verb), '{}', { timeout: 2_000 }),
        verb,
      ).rejects.toThrow(/Permissions Violation/);
    }
    await expect(
      jetstream(nc).publish(n.subjects.run('sup'), '{}', { timeout: 2_000 }),
    ).rejects.toThrow();
    await sup.kill('SIGTERM');
  });

  it('no token or password ever appears in a log or an output', async () => {
    // Every process so far, stopped cleanly so its last lines are written.
    await backend.kill('SIGTERM');
    expect(tokens.size).toBeGreaterThan(0);
    const secrets = [...tokens, ...passwords.values()];
    for (const o of outputs) {
      const text = o.text();
      for (const s of secrets) {
        expect(text.includes(s), `${o.name} shows a secret`).toBe(false);
      }
    }
    // backend, two workers, submit, export, two status runs, a supervisor
    expect(outputs.length).toBeGreaterThanOrEqual(8);
  });
});
