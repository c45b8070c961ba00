/**
 * Access control, for real, in secure mode as deployed: a nats-server in operator mode with
 * what `sonar creds init` makes (the files deploy/ ships servers and processes with), a
 * backend holding the worker signing key, workers that hold only the fleet's bootstrap
 * credential and enroll, CLI verbs each with its own role's credential. Shows that each role
 * does its work and nothing it must not, and that a compromised worker (one that enrolled
 * like any other and so holds a JWT and seed of its own) fails at every attack that the
 * shared worker credential of the old accounts file allowed: the registry rollup wipe, the
 * outputs purge, the `_INBOX` sniff, a forged result with a known token, `leave` and `drain`
 * of another worker, a forged registry entry; and that no client or operator deletes a
 * backend's consumer. No token or secret ever reaches a log.
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { createUser } from '@nats-io/nkeys';
import { Objm } from '@nats-io/obj';
import { connect, credsAuthenticator, headers, jwtAuthenticator } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { names } from '../../streams/names.js';
import type { CredsRole } from '../../src/auth/creds-init.js';
import { roleInboxPrefix, workerInboxPrefix } from '../../src/auth/permissions.js';
import type { CredentialReply } from '../../src/protocol.js';
import { ApiClient, isApiError } from '../../src/worker/api-client.js';
import { BackendSource } from '../../src/worker/backend-pull.js';
import type { Delivery, PullBatch } from '../../src/worker/dispatch-source.js';
import { eventually } from '../helpers/eventually.js';
import { publishOutcome, subscribeOutcome } from '../helpers/permission-probes.js';
import { writeRunFile } from '../helpers/run-file.js';
import { securePerFile } from '../helpers/secure-per-file.js';
import { killAll, runSonar, spawnSonar } from '../helpers/sonar-process.js';
import type { SonarProcess } from '../helpers/sonar-process.js';
import { NO_IMDS } from '../helpers/worker-fixtures.js';

let dir: string;
const secure = securePerFile();
const conns: NatsConnection[] = [];
/** Every process and CLI run, for the log check at the end. */
const outputs: { name: string; text: () => string }[] = [];
/** Every attempt token the backend published, by attempt id, seen by the backend credential. */
const tokens = new Map<string, string>();
let backend: SonarProcess;
let backendNc: NatsConnection;
const n = names('sonar');

const FAST = {
  // Debug: the most a process ever logs, so a leak would show.
  SONAR_LOG_LEVEL: 'debug',
  SONAR_PULSE_INTERVAL: '300ms',
  SONAR_PULSE_TTL: '1500ms',
  // A lock TTL that survives a loaded machine: a 1 s lease can flap under load.
  SONAR_TICK: '500ms',
  SONAR_LOCK_TTL: '5s',
  // A Running task whose worker's key is gone is recovered after this long.
  SONAR_ORPHAN_AGE: '3s',
  SONAR_IMDS_URL: NO_IMDS,
};

const envOf = (role: CredsRole): Record<string, string> => ({ ...secure().envFor(role), ...FAST });

async function connectAs(role: CredsRole): Promise<NatsConnection> {
  const nc = await connect({
    servers: secure().server.url,
    authenticator: credsAuthenticator(await readFile(secure().creds[role])),
    inboxPrefix: roleInboxPrefix(role as Exclude<CredsRole, 'sys'>),
    reconnect: false,
  });
  conns.push(nc);
  return nc;
}

/**
 * A compromised worker host: it enrolls with the fleet's bootstrap credential like any
 * worker, so it holds a JWT and seed of its own, and connects with them.
 */
async function compromisedWorker(workerId: string, tags: string[] = ['acl']) {
  const kp = createUser();
  const bootstrap = await connectAs('bootstrap');
  const reply = await new ApiClient(bootstrap, n).request<'enroll', CredentialReply>('enroll', {
    workerId,
    publicKey: kp.getPublicKey(),
  });
  expect(reply.mode).toBe('secure');
  // It lives in the workers' account, which reaches JetStream under its own API prefix.
  expect(reply.jsApiPrefix).toBe(n.subjects.workerJsApi);
  // and it pulls through a backend, on subjects under its own id
  expect(reply.pullSubject).toBe(n.subjects.pull(workerId));
  const nc = await connect({
    servers: secure().server.url,
    authenticator: jwtAuthenticator(reply.jwt!, kp.getSeed()),
    inboxPrefix: workerInboxPrefix(workerId),
    reconnect: false,
  });
  conns.push(nc);
  const api = new ApiClient(nc, n, {
    retryForMs: 0,
    subject: (verb) => n.subjects.workerApi(workerId, verb),
  });
  await api.request('join', { workerId, host: 'attacker', tags, slots: 1 });
  return { nc, api };
}

/**
 * The credentials a backend's own bucket or consumer must be safe from, connected: a client,
 * an operator and a compromised worker (enrolled as `workerId`).
 */
async function outsiders(workerId: string) {
  const { nc: worker } = await compromisedWorker(workerId);
  return [
    ['operator', await connectAs('operator')],
    ['client', await connectAs('client')],
    ['worker', worker],
  ] as const;
}

/** A worker connection's JetStream client, under the workers' account's API prefix. */
const workerJs = (nc: NatsConnection) =>
  jetstream(nc, { apiPrefix: n.subjects.workerJsApi, timeout: 2_000 });

function spawnAs(role: CredsRole, name: string, args: string[]): SonarProcess {
  const p = spawnSonar(name, args, envOf(role));
  outputs.push({ name, text: () => p.stderr() + p.stdout() });
  return p;
}

/** A `sonar worker` holding only the bootstrap credential, as every worker host does. */
async function startWorker(id: string, tags: string, command: string[]): Promise<SonarProcess> {
  const w = spawnAs('bootstrap', id, [
    'worker',
    '--worker-id',
    id,
    '--tags',
    tags,
    '--',
    ...command,
  ]);
  await eventually(() => w.stderr().includes('worker joined') || !w.running, {
    timeoutMs: 30_000,
  });
  expect(w.running, w.stderr()).toBe(true);
  return w;
}

/** Runs one CLI verb to its end with a role's credential. */
async function cli(role: CredsRole, args: string[]) {
  const r = await runSonar(`${role}: sonar ${args.join(' ')}`, args, envOf(role));
  outputs.push({ name: `${role} ${args[0]}`, text: () => r.stderr + r.stdout });
  return r;
}

const lastSeq = async (stream: string): Promise<number> =>
  (await (await jetstreamManager(backendNc)).streams.info(stream)).state.last_seq;

const registryKeys = async (): Promise<string[]> => {
  const keys: string[] = [];
  for await (const k of await (await new Kvm(backendNc).open(n.buckets.workers)).keys()) {
    keys.push(k);
  }
  return keys.sort();
};

const lastTaskEvent = async (runId: string, taskId: string) => {
  const m = await (
    await jetstreamManager(backendNc)
  ).streams.getMessage(n.streams.events, { last_by_subj: n.subjects.task(runId, taskId) });
  return m?.json<{ type: string; data: { attemptId: string; reason?: string } }>();
};

/** Submits a one-step run through the client API and returns once it is committed. */
async function submit(runId: string, tags: string[], taskIds: string[]): Promise<void> {
  const api = new ApiClient(await connectAs('client'), n);
  await api.request('submit.begin', {
    runId,
    hash: 'h',
    steps: [{ id: 's', tags, taskCount: taskIds.length }],
    taskCount: taskIds.length,
  });
  await api.request('submit.tasks', { runId, stepId: 's', tasks: taskIds.map((id) => ({ id })) });
  await api.request('submit.commit', { runId });
}

/** Waits for the task's `TaskStarted` and gives its attempt id and token. */
async function started(runId: string, taskId: string) {
  return eventually(
    async () => {
      const e = await lastTaskEvent(runId, taskId);
      if (e?.type !== 'TaskStarted') return false;
      const token = tokens.get(e.data.attemptId);
      return token === undefined ? false : { attemptId: e.data.attemptId, token };
    },
    { timeoutMs: 30_000 },
  );
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sonar-acl-'));
  backend = spawnAs('backend', 'backend', ['backend']);
  await eventually(() => backend.stderr().includes('backend started') || !backend.running, {
    timeoutMs: 30_000,
  });
  expect(backend.running, backend.stderr()).toBe(true);
  backendNc = await connectAs('backend');
  // The backend credential sees dispatch messages on the wire: collect every token.
  backendNc.subscribe(n.subjects.dispatchAll, {
    callback: (_err, m) => {
      const d = m.json<{ attemptId?: unknown; token?: unknown }>() ?? {};
      if (typeof d.token === 'string' && typeof d.attemptId === 'string') {
        tokens.set(d.attemptId, d.token);
      }
    },
  });
}, 60_000);

afterAll(async () => {
  await killAll();
  await Promise.all(conns.map((c) => c.close().catch(() => {})));
  await rm(dir, { recursive: true, force: true });
});

describe('access control in secure mode (sonar creds init, as deployed)', () => {
  it('each role does its own work: a client submits, workers run it, an operator reads', async () => {
    await startWorker('acl-w1', 'acl', ['cat']);
    const runFile = await writeRunFile(dir, {
      runId: 'acl',
      steps: [
        { id: 's', tags: ['acl'], tasks: [1, 2, 3].map((i) => ({ id: `t${i}`, input: { i } })) },
      ],
    });
    const submitted = await cli('client', ['submit', runFile, '--wait', '--json']);
    expect(submitted.code, submitted.stderr).toBe(0);
    expect(submitted.stdout).toMatch(/"state":"Succeeded"/);

    const exported = await cli('operator', ['export', '--run', 'acl']);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout.trim().split('\n').length).toBeGreaterThan(10);
    const status = await cli('operator', ['status', '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(tokens.size).toBeGreaterThanOrEqual(3);
  }, 120_000);

  it("a task's log and progress reach clients and operators through the backend; no worker writes them itself", async () => {
    await startWorker('acl-logger', 'acl-logs', ['sh', '-c', 'echo line-on-stderr >&2; cat']);
    await submit('logged', ['acl-logs'], ['t1']);
    await eventually(async () => (await lastTaskEvent('logged', 't1'))?.type === 'TaskFinalized', {
      timeoutMs: 30_000,
    });
    for (const role of ['client', 'operator'] as const) {
      const logs = await cli(role, ['logs', 'logged', 't1']);
      expect(logs.code, logs.stderr).toBe(0);
      expect(logs.stdout).toBe('line-on-stderr\n');
    }
    const { nc } = await compromisedWorker('acl-logs');
    expect(await publishOutcome(nc, n.subjects.logs('acl', 't1', 1))).toBe('denied');
    expect(await publishOutcome(nc, `$KV.${n.buckets.progress}.acl.t1`)).toBe('denied');
    expect(await publishOutcome(nc, `${n.subjects.workerJsApi}.DIRECT.GET.${n.streams.logs}`)).toBe(
      'denied',
    );
  });

  it('only the backend credential reaches the dashboard sessions bucket', async () => {
    const own = await new Kvm(backendNc).open(n.buckets.sessions);
    await own.put('acl-session', '{"createdAt":0}');
    expect((await own.get('acl-session'))?.string()).toBe('{"createdAt":0}');
    for (const [role, nc] of await outsiders('acl-sessions')) {
      const read = async () => {
        const kv = await new Kvm(jetstream(nc, { timeout: 2_000 })).open(n.buckets.sessions);
        return kv.get('acl-session');
      };
      await expect(read(), role).rejects.toThrow();
      expect(await publishOutcome(nc, `$KV.${n.buckets.sessions}.forged`), role).toBe('denied');
    }
    await own.delete('acl-session');
    expect(await own.get('forged')).toBeNull();
  });

  it('a worker cannot append events, publish dispatch messages or use client and supervisor verbs', async () => {
    const { nc, api } = await compromisedWorker('acl-w2');
    const events = await lastSeq(n.streams.events);
    const dispatch = await lastSeq(n.streams.dispatch);
    const forged = JSON.stringify({ id: 'forged', type: 'TaskCreated', v: 1, data: {} });
    await expect(
      jetstream(nc).publish(n.subjects.task('acl', 'forged'), forged, { timeout: 2_000 }),
    ).rejects.toThrow();
    expect(await publishOutcome(nc, n.subjects.dispatch('acl'))).toBe('denied');
    for (const verb of ['submit.begin', 'cancel', 'exited', 'revoke', 'join', 'enroll']) {
      expect(await publishOutcome(nc, n.subjects.api(verb)), verb).toBe('denied');
    }
    expect(await lastSeq(n.streams.events)).toBe(events);
    expect(await lastSeq(n.streams.dispatch)).toBe(dispatch);
    // While its own verbs work: the same join again is answered.
    const joined = await api.request('join', {
      workerId: 'acl-w2',
      host: 'attacker',
      tags: ['acl'],
      slots: 1,
    });
    expect(joined).toMatchObject({ stream: n.streams.dispatch });
  });

  it('a worker is pulled for by a backend: only its own tags, at most its slots, a bounded number of pulls open', async () => {
    const { nc: thief } = await compromisedWorker('acl-thief', ['acl-mine']);
    const { nc: honest } = await compromisedWorker('acl-honest', ['acl-theirs']);
    const sourceOf = (nc: NatsConnection, workerId: string, tag: string) =>
      new BackendSource(nc, `${n.subjects.pull(workerId)}.${tag}`);
    const take = async (batch: Promise<PullBatch>): Promise<Delivery[]> => {
      const got: Delivery[] = [];
      for await (const d of await batch) got.push(d);
      return got;
    };
    for (const i of [1, 2]) {
      await jetstream(backendNc).publish(n.subjects.dispatch('acl-theirs'), `{"probe":${i}}`);
    }
    // The credential cannot pull the consumer itself, nor ask under another worker's id.
    const next = `CONSUMER.MSG.NEXT.${n.streams.dispatch}.${n.consumers.dispatch('acl-theirs')}`;
    expect(await publishOutcome(thief, `${n.subjects.workerJsApi}.${next}`)).toBe('denied');
    expect(await publishOutcome(thief, `${n.subjects.pull('acl-honest')}.acl-theirs`)).toBe(
      'denied',
    );
    // A tag it did not join with: refused, and nothing taken.
    await expect(
      take(sourceOf(thief, 'acl-thief', 'acl-theirs').pull(1, 1_000)),
    ).rejects.toMatchObject({ code: 'forbidden' });
    // Its own tag, where nothing waits: two pulls stay open, a third is refused at once.
    const mine = sourceOf(thief, 'acl-thief', 'acl-mine');
    const open = [mine.pull(1, 4_000), mine.pull(1, 4_000)].map(take);
    await expect(take(mine.pull(1, 4_000))).rejects.toMatchObject({ code: 'unavailable' });
    // The honest worker (1 slot) asks for ten and is given one, then the other.
    for (const probe of [1, 2]) {
      const got = await take(sourceOf(honest, 'acl-honest', 'acl-theirs').pull(10, 2_000));
      expect(got.map((d) => d.json<{ probe: number }>().probe)).toEqual([probe]);
      got[0]!.ack();
    }
    // The thief's open pulls end empty at their expiry, with no error.
    expect(await Promise.all(open)).toEqual([[], []]);
  }, 60_000);

  it('a worker cannot wipe the registry with a rollup, nor write another worker’s key', async () => {
    const { nc } = await compromisedWorker('acl-rollup');
    const own = await new Kvm(workerJs(nc)).open(n.buckets.workers, { allow_direct: true });
    await own.put('acl-rollup', '{}');
    const before = await registryKeys();
    expect(before).toEqual(expect.arrayContaining(['acl-w1', 'acl-rollup']));
    const js = workerJs(nc);
    // A rollup of `all` on its own key would purge the whole KV stream: the bucket refuses
    // rollup headers.
    const h = headers();
    h.set('Nats-Rollup', 'all');
    await expect(
      js.publish(`${n.subjects.workerJsApi}.$KV.${n.buckets.workers}.acl-rollup`, '{}', {
        headers: h,
      }),
    ).rejects.toThrow(/rollup/i);
    // Another worker's key, a purge of the bucket's stream, or its deletion: not its to send,
    // under the workers' prefix or the application account's own subjects.
    for (const jsApi of [n.subjects.workerJsApi, '$JS.API']) {
      expect(await publishOutcome(nc, `${jsApi}.$KV.${n.buckets.workers}.acl-w1`)).toBe('denied');
      for (const verb of ['PURGE', 'DELETE', 'UPDATE']) {
        expect(await publishOutcome(nc, `${jsApi}.STREAM.${verb}.KV_${n.buckets.workers}`)).toBe(
          'denied',
        );
      }
    }
    expect(await publishOutcome(nc, `$KV.${n.buckets.workers}.acl-w1`)).toBe('denied');
    expect(await registryKeys()).toEqual(expect.arrayContaining(before));
  });

  it('a worker cannot purge stored outputs, nor touch the object store or the event log', async () => {
    const store = await new Objm(backendNc).create(n.objectStores.outputs);
    await store.putBlob({ name: 'acl/probe/a1' }, new TextEncoder().encode('kept'));
    const stored = await lastSeq(`OBJ_${n.objectStores.outputs}`);
    const { nc } = await compromisedWorker('acl-purge');
    for (const apiPrefix of [n.subjects.workerJsApi, '$JS.API']) {
      const jsm = await jetstreamManager(nc, { apiPrefix, timeout: 2_000, checkAPI: false });
      await expect(jsm.streams.purge(`OBJ_${n.objectStores.outputs}`)).rejects.toThrow();
      await expect(jsm.streams.purge(n.streams.events)).rejects.toThrow();
      await expect(jsm.streams.delete(n.streams.dispatch)).rejects.toThrow();
    }
    expect(await publishOutcome(nc, `$O.${n.objectStores.outputs}.C.forged`)).toBe('denied');
    expect(await lastSeq(`OBJ_${n.objectStores.outputs}`)).toBe(stored);
    expect(new TextDecoder().decode(await store.getBlob('acl/probe/a1'))).toBe('kept');
  });

  it('a worker cannot read another worker’s deliveries or replies: no shared inbox', async () => {
    const { nc } = await compromisedWorker('acl-sniff');
    for (const subject of [
      '_INBOX.>',
      '>',
      `${workerInboxPrefix('acl-w1')}.>`,
      `${roleInboxPrefix('backend')}.>`,
      `${roleInboxPrefix('client')}.>`,
      `${roleInboxPrefix('bootstrap')}.>`,
      n.subjects.eventsAll,
      n.subjects.dispatchAll,
    ]) {
      expect(await subscribeOutcome(nc, subject), subject).toBe('denied');
    }
    // Its own inbox works: its request above was answered there.
    expect(await subscribeOutcome(nc, `${workerInboxPrefix('acl-sniff')}.>`)).toBe('allowed');
  });

  it('no answer to a request lands where its sender names: replies stay in the workers’ account, and the backend answers no stored subject', async () => {
    // NATS never checks a reply subject against permissions, and JetStream and the backend
    // answer on whatever reply a request names. In the application account that would let a
    // worker write a registry key, the leader lock or an event; from the workers' account the
    // answer goes back into the workers' account, where nothing is stored.
    const { nc } = await compromisedWorker('acl-hijack');
    const bootstrap = await connectAs('bootstrap');
    const client = await connectAs('client');
    const operator = await connectAs('operator');
    const cancel = JSON.stringify({ runId: 'acl-hijack-none' });
    const revoke = JSON.stringify({ workerId: 'acl-hijack-none' });
    const jsApi = n.subjects.workerJsApi;
    const targets = [
      { stream: `KV_${n.buckets.workers}`, subject: `$KV.${n.buckets.workers}.acl-hijacked` },
      { stream: `KV_${n.buckets.locks}`, subject: `$KV.${n.buckets.locks}.acl-hijacked` },
      { stream: n.streams.events, subject: n.subjects.system('acl-hijacked') },
    ];
    const requests = [
      {
        what: 'a pull',
        nc,
        subject: `${n.subjects.pull('acl-hijack')}.acl`,
        body: JSON.stringify({ batch: 1, expiresMs: 1_000 }),
      },
      { what: 'a pulse', nc, subject: `${jsApi}.$KV.${n.buckets.workers}.acl-hijack`, body: '{}' },
      {
        what: 'a worker verb',
        nc,
        subject: n.subjects.workerApi('acl-hijack', 'join'),
        body: JSON.stringify({ workerId: 'acl-hijack', host: 'h', tags: ['acl'], slots: 1 }),
      },
      {
        what: 'an enrollment',
        nc: bootstrap,
        subject: n.subjects.api('enroll'),
        body: JSON.stringify({ workerId: 'acl-hijack2', publicKey: createUser().getPublicKey() }),
      },
      // In the application account a reply stays where it is named, so the backend itself
      // refuses to answer onto a stored subject.
      { what: 'a client verb', nc: client, subject: n.subjects.api('cancel'), body: cancel },
      { what: 'an operator verb', nc: operator, subject: n.subjects.api('revoke'), body: revoke },
    ];
    for (const r of requests) {
      // The control: named its own inbox, the request is answered there.
      const inbox =
        r.nc === nc
          ? `${workerInboxPrefix('acl-hijack')}.ctl`
          : `${roleInboxPrefix(r.nc === bootstrap ? 'bootstrap' : r.nc === client ? 'client' : 'operator')}.ctl`;
      const answered = r.nc.subscribe(inbox, { max: 1 });
      const got = (async () => {
        for await (const m of answered) return m;
        return null;
      })();
      r.nc.publish(r.subject, r.body, { reply: inbox });
      const timeout = new Promise<null>((done) => setTimeout(() => done(null), 5_000));
      expect(await Promise.race([got, timeout]), `${r.what} is answered`).not.toBeNull();
      for (const t of targets) r.nc.publish(r.subject, r.body, { reply: t.subject });
      await r.nc.flush();
    }
    // Every answer would have arrived long before this.
    await new Promise((done) => setTimeout(done, 1_000));
    const jsm = await jetstreamManager(backendNc);
    for (const t of targets) {
      const stored = await jsm.streams
        .getMessage(t.stream, { last_by_subj: t.subject })
        .catch(() => null);
      expect(stored, t.subject).toBeNull();
    }
  });

  it('a forged result, fail or release with a known token is refused: the holder is matched', async () => {
    const slow = await startWorker('acl-slow', 'slow', ['sleep', '30']);
    await submit('fence', ['slow'], ['t']);
    // The worst case: the attacker knows the token (sniffing it is refused above).
    const attempt = { runId: 'fence', taskId: 't', ...(await started('fence', 't')) };
    const { nc, api } = await compromisedWorker('acl-intruder', ['slow']);
    const output = { inline: '', bytes: 0 };
    const refusal = async (p: Promise<unknown>): Promise<string> => {
      const err: unknown = await p.then(
        () => null,
        (e: unknown) => e,
      );
      return isApiError(err) ? err.code : String(err);
    };
    // Under its own id the holder check refuses it; under the holder's id, the subject does.
    expect(
      await refusal(api.request('result', { ...attempt, workerId: 'acl-intruder', output })),
    ).toBe('stale_attempt');
    for (const verb of ['result', 'fail', 'release'] as const) {
      const body = {
        ...attempt,
        workerId: 'acl-slow',
        ...(verb === 'result' && { output }),
        ...(verb === 'fail' && { exitCode: 1, error: 'x' }),
      };
      expect(await refusal(api.request(verb, body)), verb).toBe('forbidden');
      expect(await publishOutcome(nc, n.subjects.workerApi('acl-slow', verb)), verb).toBe('denied');
      expect(await publishOutcome(nc, n.subjects.api(verb)), verb).toBe('denied');
    }
    // The task is still the slow worker's, still running.
    expect((await lastTaskEvent('fence', 't'))?.type).toBe('TaskStarted');
    expect(slow.running).toBe(true);
  });

  it('a worker cannot leave or drain another worker', async () => {
    const { nc, api } = await compromisedWorker('acl-saboteur');
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => 'answered',
        (e: unknown) => (isApiError(e) ? e.code : String(e)),
      );
    expect(await refusal(api.request('leave', { workerId: 'acl-slow' }))).toBe('forbidden');
    expect(await refusal(api.request('drain', { workerId: 'acl-slow', reason: 'shutdown' }))).toBe(
      'forbidden',
    );
    for (const verb of ['leave', 'drain']) {
      expect(await publishOutcome(nc, n.subjects.workerApi('acl-slow', verb))).toBe('denied');
      expect(await publishOutcome(nc, n.subjects.api(verb))).toBe('denied');
    }
    // The slow worker is still in service: its task runs, its key is there.
    expect((await lastTaskEvent('fence', 't'))?.type).toBe('TaskStarted');
    expect(await registryKeys()).toContain('acl-slow');
    await new ApiClient(await connectAs('client'), n).request('cancel', { runId: 'fence' });
  });

  it('a forged registry entry keeps no dead worker alive: its task is recovered', async () => {
    const doomed = await startWorker('acl-doomed', 'doomed', ['sleep', '30']);
    await submit('doomed', ['doomed'], ['t']);
    const attempt = await started('doomed', 't');
    const { nc } = await compromisedWorker('acl-forger', ['doomed']);
    const kv = await new Kvm(workerJs(nc)).open(n.buckets.workers, { allow_direct: true });
    await doomed.kill('SIGKILL');
    // It pulses, under its own key, entries that name the dead worker and its task.
    const forged = () =>
      JSON.stringify({
        workerId: 'acl-doomed',
        host: 'h',
        tags: ['doomed'],
        slots: 1,
        active: true,
        pulseAt: new Date().toISOString(),
        running: [{ runId: 'doomed', taskId: 't', attemptId: attempt.attemptId }],
      });
    const forging = setInterval(() => void kv.put('acl-forger', forged()).catch(() => {}), 200);
    try {
      await expect(kv.put('acl-doomed', forged())).rejects.toThrow(/permissions violation/i);
      const requeued = await eventually(
        async () => {
          const e = await lastTaskEvent('doomed', 't');
          return e?.type === 'TaskRequeued' || e?.type === 'TaskPublished' ? e : false;
        },
        { timeoutMs: 30_000 },
      ).catch(async (err: unknown) => {
        const e = await cli('operator', ['export', '--run', 'doomed']);
        throw new Error(`${String(err)}\nlog:\n${e.stdout}`);
      });
      expect(requeued.type).toMatch(/TaskRequeued|TaskPublished/);
    } finally {
      clearInterval(forging);
    }
    await new ApiClient(await connectAs('client'), n).request('cancel', { runId: 'doomed' });
  }, 60_000);

  it('no client, operator or worker deletes a backend’s consumer', async () => {
    const jsm = await jetstreamManager(backendNc);
    const consumersOf = async (stream: string): Promise<string[]> =>
      (await jsm.consumers.list(stream).next()).map((c) => c.name).sort();
    const durable = {
      [n.streams.events]: await consumersOf(n.streams.events),
      [n.streams.dispatch]: await consumersOf(n.streams.dispatch),
    };
    expect(durable[n.streams.dispatch]).toContain(n.consumers.dispatch('acl'));
    for (const [role, nc] of await outsiders('acl-deleter')) {
      const prefixes = [
        '$JS.API',
        role === 'worker' ? n.subjects.workerJsApi : n.subjects.readerJsApi,
      ];
      for (const [stream, names] of Object.entries(durable)) {
        for (const name of names) {
          for (const jsApi of prefixes) {
            const outcome = await publishOutcome(nc, `${jsApi}.CONSUMER.DELETE.${stream}.${name}`);
            // A reader may publish under its own prefix, but its account imports no delete:
            // the request reaches no one (the lists below are unchanged).
            if (jsApi !== n.subjects.readerJsApi) {
              expect(outcome, `${role} ${stream} ${name}`).toBe('denied');
            }
          }
        }
      }
    }
    expect(await consumersOf(n.streams.dispatch)).toEqual(durable[n.streams.dispatch]);
    expect(await consumersOf(n.streams.events)).toEqual(
      expect.arrayContaining(durable[n.streams.events]!),
    );
  });

  it('an operator credential runs cancel, rerun, poisoned retry and sweep through the API, and cannot append', async () => {
    const nc = await connectAs('operator');
    const events = await lastSeq(n.streams.events);
    for (const verb of ['exited', 'enroll', 'join', 'start']) {
      expect(await publishOutcome(nc, n.subjects.api(verb)), verb).toBe('denied');
    }
    for (const subject of [
      `$JS.API.STREAM.PURGE.${n.streams.events}`,
      `$JS.API.STREAM.MSG.DELETE.${n.streams.events}`,
      `$JS.API.STREAM.UPDATE.${n.streams.events}`,
      n.subjects.finalize('op', 't1'),
    ]) {
      expect(await publishOutcome(nc, subject), subject).toBe('denied');
    }
    await expect(
      jetstream(nc).publish(n.subjects.run('op'), '{}', { timeout: 2_000 }),
    ).rejects.toThrow();
    expect(await lastSeq(n.streams.events)).toBe(events);

    // What it may change, it asks a backend for: a run no worker serves, cancelled and rerun.
    await submit('op-run', ['acl-nobody'], ['t1']);
    const asOperator = async (args: string[]) => {
      const r = await cli('operator', args);
      expect(r.stderr, args.join(' ')).not.toMatch(/Permissions Violation|Authorization/);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      return r;
    };
    await asOperator(['cancel', 'op-run']);
    await asOperator(['rerun', 'op-run', '--failed', '--as', 'op-rerun']);
    await asOperator(['cancel', 'op-rerun']);
    expect((await lastTaskEvent('op-rerun', 't1'))?.type).toBe('TaskCancelled');
    const list = await asOperator(['poisoned', 'list', '--json']);
    expect(JSON.parse(list.stdout)).toEqual({ tasks: [] });
    // Served, and refused on its merits: the task is not Poisoned.
    await expect(
      new ApiClient(nc, n).request('poisoned.retry', { runId: 'op-run', taskId: 't1', by: 'op' }),
    ).rejects.toMatchObject({ code: 'illegal_transition', message: /is Cancelled, not Poisoned/ });
    const sweep = await asOperator(['sweep', '--json']);
    expect(JSON.parse(sweep.stdout)).toMatchObject({ failed: [] });
    // While it reads: status over the same credential, through the CLI.
    const status = await asOperator(['status', '--run', 'acl', '--json']);
    expect(status.stdout).toMatch(/Succeeded/);
  }, 60_000);

  it('a worker whose registry key vanished reads it, puts it back and asks with its own credential; declared Lost, it exits', async () => {
    const w = await startWorker('acl-fenced', 'fenced', ['cat']);
    const kv = await new Kvm(backendNc).open(n.buckets.workers);
    // As if its TTL ran out in an outage: the compare-and-set of its next pulse loses, it
    // reads its own key (a direct get its credential allows), finds it gone, creates it
    // again and repeats its join, which is answered `ok`: it carries on.
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
  }, 60_000);

  it('a supervisor runs its workers and reports their exits, and no more', async () => {
    // `sonar workers` and its children share the supervisor credential; the children enroll.
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
    // But a supervisor cannot submit, cancel, use worker verbs or append.
    const nc = await connectAs('supervisor');
    for (const subject of [
      n.subjects.api('submit.begin'),
      n.subjects.api('cancel'),
      n.subjects.api('join'),
      n.subjects.workerApi('acl-w1', 'leave'),
    ]) {
      expect(await publishOutcome(nc, subject), subject).toBe('denied');
    }
    await expect(
      jetstream(nc).publish(n.subjects.run('sup'), '{}', { timeout: 2_000 }),
    ).rejects.toThrow();
    await sup.kill('SIGTERM');
  }, 60_000);

  it('answers aimed at the workers’ account’s own subjects: the server stays up, no verb runs, no cancel is forged', async () => {
    // In the workers' account an answer routed back lands on whatever subject its request
    // named, the account's own imports included: a verb of the backend, the cancel broadcast,
    // a mapped JetStream import (which crashed nats-server 2.9 while it ended in `*`).
    const bystander = await startWorker('acl-bystander', 'bystander', ['sleep', '30']);
    await submit('bystand', ['bystander'], ['t']);
    await started('bystand', 't');
    const { nc } = await compromisedWorker('acl-mirror');
    const bootstrap = await connectAs('bootstrap');
    const jsApi = n.subjects.workerJsApi;
    const bucket = n.buckets.workers;
    // What a direct get of its own key answers: bytes it chose, shaped as a cancel and as the
    // bystander's verbs would read them.
    const chosen = JSON.stringify({ runId: 'bystand', taskId: 't', workerId: 'acl-bystander' });
    await nc.request(`${jsApi}.$KV.${bucket}.acl-mirror`, chosen, { timeout: 5_000 });
    const triggers = [
      { nc, subject: `${jsApi}.DIRECT.GET.KV_${bucket}.$KV.${bucket}.acl-mirror`, body: '' },
      {
        nc,
        subject: `${n.subjects.pull('acl-mirror')}.acl`,
        body: JSON.stringify({ batch: 1, expiresMs: 1_000 }),
      },
      {
        nc: bootstrap,
        subject: n.subjects.api('enroll'),
        body: JSON.stringify({ workerId: 'acl-mirror2', publicKey: createUser().getPublicKey() }),
      },
    ];
    const targets = [
      n.subjects.api('exited'),
      n.subjects.workerApi('acl-bystander', 'leave'),
      n.subjects.controlCancel,
      `${jsApi}.$KV.${bucket}.acl-target`,
      `${n.subjects.pull('acl-mirror')}.acl`,
    ];
    for (const t of triggers) {
      for (const target of targets) t.nc.publish(t.subject, t.body, { reply: target });
      await t.nc.flush();
    }
    await new Promise((done) => setTimeout(done, 1_500));

    // The server is up: a new connection is served, and so is the backend.
    const client = new ApiClient(await connectAs('client'), n);
    await expect(client.request('cancel', { runId: 'acl-none' })).rejects.toMatchObject({
      code: 'not_found',
    });
    // The answers that reached the backend's verbs carried no reply: ignored, nothing ran.
    await eventually(() => backend.stderr().includes('api messages ignored'), { timeoutMs: 5_000 });
    expect(bystander.running, bystander.stderr()).toBe(true);
    expect(bystander.stderr()).not.toMatch(/is Lost|has left/);
    expect(await registryKeys()).toContain('acl-bystander');
    // The forged cancel reached the bystander, which told it from the backend's and ran on.
    await eventually(() => bystander.stderr().includes('cancel broadcasts ignored'), {
      timeoutMs: 5_000,
    });
    expect((await lastTaskEvent('bystand', 't'))?.type).toBe('TaskStarted');
    // The backend's own cancel still stops it.
    await client.request('cancel', { runId: 'bystand' });
    await eventually(() => bystander.stderr().includes('task cancelled'), { timeoutMs: 10_000 });
  }, 60_000);

  it('no token or secret ever appears in a log or an output', async () => {
    // Every process so far, stopped cleanly so its last lines are written.
    await backend.kill('SIGTERM');
    expect(tokens.size).toBeGreaterThan(0);
    // Every nkey seed `sonar creds init` wrote (in .nk and .creds files).
    const seeds = new Set<string>();
    for (const f of await readdir(secure().dir)) {
      const text = await readFile(join(secure().dir, f), 'utf8').catch(() => '');
      for (const m of text.matchAll(/\bS[UOA][A-Z2-7]{56}\b/g)) seeds.add(m[0]);
    }
    expect(seeds.size).toBeGreaterThan(5);
    const secrets = [...tokens.values(), ...seeds];
    for (const o of outputs) {
      const text = o.text();
      for (const s of secrets) {
        expect(text.includes(s), `${o.name} shows a secret`).toBe(false);
      }
    }
    // backend, five workers, submit, export, two status runs, a supervisor
    expect(outputs.length).toBeGreaterThanOrEqual(10);
  });
});
