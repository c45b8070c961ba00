/**
 * Secure mode's credentials on a real nats-server 2.9.10 in operator mode, configured by
 * `sonar creds init`: every static role connects; a worker JWT minted at runtime names the
 * worker and gives it its own subjects only; a short JWT is cut off at expiry; a pushed
 * revocation cuts one worker off at once and leaves another connected.
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decode } from '@nats-io/jwt';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, credsAuthenticator } from '@nats-io/transport-node';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { names } from '../../streams/names.js';
import { ackSubjectOf } from '../../streams/nats-internals.js';
import { jetstreamOf, jetstreamOptions } from '../../streams/jetstream-api.js';
import { ReaderConsumers } from '../../src/backend/api/index.js';
import { createLogger } from '../../src/log.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS, dispatchConsumer } from '../../streams/topology.js';
import type { CredsRole } from '../../src/auth/creds-init.js';
import { roleInboxPrefix, secureNames } from '../../src/auth/permissions.js';
import { lookupAccountJwt, pushRevocation } from '../../src/auth/revoke.js';
import { eventually } from '../helpers/eventually.js';
import { publishOutcome, subscribeOutcome } from '../helpers/permission-probes.js';
import { securePerFile } from '../helpers/secure-per-file.js';
import { runSonar } from '../helpers/sonar-process.js';
import { CREDENTIAL_FILE_USES } from '../../src/auth/creds-init.js';
import type { MintedWorker } from '../helpers/secure-nats.js';

const n = names('sonar');
const secure = securePerFile();
const conns: NatsConnection[] = [];

afterAll(async () => {
  await Promise.all(conns.map((c) => c.close().catch(() => {})));
});

async function connectRole(role: CredsRole, extra: Partial<ConnectionOptions> = {}) {
  const nc = await connect({
    servers: secure().server.url,
    authenticator: credsAuthenticator(await readFile(secure().creds[role])),
    ...(role !== 'sys' && { inboxPrefix: roleInboxPrefix(role) }),
    reconnect: false,
    ...extra,
  });
  conns.push(nc);
  return nc;
}

/** A fresh user key and a JWT minted for it by the worker signing key. */
const mintWorker = (workerId: string, ttlMs = 60_000): Promise<MintedWorker> =>
  secure().mintWorker(workerId, { ttlMs });

/** A connection as the minted worker (closed after the file's tests). */
async function connectWorker(w: MintedWorker) {
  const nc = await secure().connectAsWorker(w, { reconnect: false });
  conns.push(nc);
  return nc;
}

describe('sonar creds init on nats-server 2.9.10', () => {
  it('the server runs in operator mode and every static role connects with its creds', async () => {
    expect(secure().server.logs()).toMatch(/Operator: "sonar"/);
    for (const role of [
      'backend',
      'client',
      'operator',
      'supervisor',
      'bootstrap',
      'sys',
    ] as const) {
      const nc = await connectRole(role);
      await nc.flush();
      expect(nc.info?.jetstream, role).toBeDefined();
    }
    // The account has JetStream: the backend provisions the whole topology.
    const backend = await connectRole('backend');
    await ensureTopology(await jetstreamManager(backend), n, DEFAULT_TOPOLOGY_OPTIONS);
    // The SYS user reads the account JWT the resolver holds.
    const sys = await connectRole('sys');
    for (const account of [secure().credentials.account, secure().credentials.workersAccount]) {
      const jwt = await lookupAccountJwt(sys, account.publicKey);
      expect(decode(jwt).sub).toBe(account.publicKey);
    }
  });

  it('a worker JWT gives the worker its own subjects and no one else’s', async () => {
    const w1 = await mintWorker('w1');
    const claims = decode<{ issuer_account?: string }>(w1.jwt);
    expect(claims.name).toBe('w1');
    expect(claims.nats.issuer_account).toBe(secure().credentials.workersAccount.publicKey);
    expect(claims.iss).toBe(secure().credentials.workerSigning.publicKey);
    const nc = await connectWorker(w1);

    expect(await publishOutcome(nc, 'sonar.api.w.w1.join')).toBe('allowed');
    expect(await publishOutcome(nc, 'sonar.api.w.w2.join')).toBe('denied');
    expect(await publishOutcome(nc, 'sonar.api.join')).toBe('denied');
    expect(await publishOutcome(nc, 'sonar.api.enroll')).toBe('denied');
    expect(await publishOutcome(nc, '$KV.sonar_workers.w2')).toBe('denied');
    expect(await publishOutcome(nc, 'sonar.events.run.x')).toBe('denied');
    // Its own registry key, through JetStream, with replies on its own inbox prefix.
    // Opened for direct gets: a plain `open()` reads with STREAM.MSG.GET, which reads any
    // key and is not in the template.
    const js = jetstream(nc, { apiPrefix: n.subjects.workerJsApi });
    const kv = await new Kvm(js).open(n.buckets.workers, { allow_direct: true });
    expect(await kv.put('w1', '{}')).toBeGreaterThan(0);
    await expect(kv.put('w2', '{}')).rejects.toThrow(/permissions violation/i);
    // and reads its own key back (a direct get by subject), not another's
    expect((await kv.get('w1'))?.string()).toBe('{}');
    await expect(kv.get('w2')).rejects.toThrow(/permissions violation/i);

    // It asks a backend to pull for it, under its own id only, and never pulls a dispatch
    // consumer itself; it acks what it is given; it stages outputs under its own id only.
    const backend = await connectRole('backend');
    const jsm = await jetstreamManager(backend);
    await jsm.consumers.add(n.streams.dispatch, dispatchConsumer(n, 'creds'));
    await jetstream(backend).publish(n.subjects.dispatch('creds'), '{"task":1}');
    const staging = secureNames(n); // the topology provisioned its stream
    expect(await publishOutcome(nc, `${n.subjects.pull('w1')}.creds`)).toBe('allowed');
    expect(await publishOutcome(nc, `${n.subjects.pull('w2')}.creds`)).toBe('denied');
    for (const verb of ['MSG.NEXT', 'INFO']) {
      const subject = `CONSUMER.${verb}.${n.streams.dispatch}.${n.consumers.dispatch('creds')}`;
      expect(await publishOutcome(nc, `${n.subjects.workerJsApi}.${subject}`), verb).toBe('denied');
      expect(await publishOutcome(nc, `$JS.API.${subject}`), verb).toBe('denied');
    }
    const backendConsumer = await jetstream(backend).consumers.get(
      n.streams.dispatch,
      n.consumers.dispatch('creds'),
    );
    const job = await backendConsumer.next({ expires: 2_000 });
    expect(job?.json()).toEqual({ task: 1 });
    const acked = await nc.request(ackSubjectOf(job!), '+ACK', { timeout: 2_000 });
    expect(acked.data.length).toBe(0); // JetStream's empty ack-of-the-ack
    expect((await js.publish('sonar.stage.w1.a1', 'out')).stream).toBe(staging.streams.staging);
    await expect(js.publish('sonar.stage.w2.a1', 'out')).rejects.toThrow(/permissions violation/i);

    expect(await subscribeOutcome(nc, '_INBOX_W.w2.>')).toBe('denied');
    expect(await subscribeOutcome(nc, '_INBOX.>')).toBe('denied');
    expect(await subscribeOutcome(nc, 'sonar.control.cancel')).toBe('allowed');
    // No allow_responses: a worker cannot answer a request made to it (the template's
    // `resp` was dropped), so it cannot write into the backend's inbox either.
    const violations: string[] = [];
    void (async () => {
      for await (const s of nc.status()) if (s.type === 'error') violations.push(String(s.error));
    })();
    nc.subscribe(n.subjects.controlCancel, { callback: (_err, m) => void m.respond('forged') });
    await nc.flush();
    await expect(
      backend.request(n.subjects.controlCancel, '{}', { timeout: 1_000 }),
    ).rejects.toThrow(/timeout/i);
    await eventually(() => violations.some((v) => /Publish to "_INBOX_R\.backend\./.test(v)));
  });

  it('operator and client read events and the registry from the readers’ account, and delete no consumer', async () => {
    const backend = await connectRole('backend');
    // A backend passes readers' consumer creates on to JetStream, after checking them.
    const creates = new ReaderConsumers(backend, n, createLogger({ level: 'error' }));
    creates.start();
    await backend.flush();
    await jetstream(backend).publish(n.subjects.run('creds-r1'), '{"type":"probe"}');
    await new Kvm(backend).open(n.buckets.workers).then((kv) => kv.put('w-listed', '{}'));
    const kept = 'backend-durable';
    const backendJsm = await jetstreamManager(backend);
    await backendJsm.consumers.add(n.streams.events, {
      durable_name: kept,
      ack_policy: AckPolicy.None,
    });
    for (const role of ['operator', 'client'] as const) {
      const nc = await connectRole(role);
      // the readers' account has no JetStream of its own: the reader finds its API prefix
      expect(await jetstreamOptions(nc, n), role).toEqual({ apiPrefix: n.subjects.readerJsApi });
      const consumer = await (await jetstreamOf(nc, n)).consumers.get(n.streams.events);
      const first = await consumer.next({ expires: 2_000 });
      expect(first?.subject, role).toBe(n.subjects.run('creds-r1'));
      await consumer.delete().catch(() => {}); // refused: the server reaps it once idle
      expect(await publishOutcome(nc, `$JS.API.CONSUMER.DELETE.${n.streams.events}.${kept}`)).toBe(
        'denied',
      );
      // Under its own prefix the delete reaches no one: the readers' account imports none.
      expect(
        await publishOutcome(
          nc,
          `${n.subjects.readerJsApi}.CONSUMER.DELETE.${n.streams.events}.${kept}`,
        ),
      ).toBe('allowed');
      expect((await backendJsm.consumers.info(n.streams.events, kept)).name).toBe(kept);
      expect(await publishOutcome(nc, n.subjects.run('forged'))).toBe('denied');
      // Only an operator may revoke a worker.
      expect(await publishOutcome(nc, n.subjects.api('revoke'))).toBe(
        role === 'operator' ? 'allowed' : 'denied',
      );
    }
    const operator = await connectRole('operator');
    const keys: string[] = [];
    const registry = await new Kvm(await jetstreamOf(operator, n)).open(n.buckets.workers);
    for await (const k of await registry.keys()) {
      keys.push(k);
    }
    expect(keys).toContain('w-listed');
    const client = await connectRole('client');
    expect(await publishOutcome(client, n.subjects.api('submit.begin'))).toBe('allowed');
    // An operator reruns by submitting; it still never appends to a stream itself.
    expect(await publishOutcome(operator, n.subjects.api('submit.begin'))).toBe('allowed');
    await creates.stop();
  });

  it('the backend answers a worker and a bootstrap holder on their own inboxes', async () => {
    const backend = await connectRole('backend');
    backend.subscribe(n.subjects.apiAll, {
      queue: 'sonar-backend',
      callback: (_err, m) => void m.respond(`answer to ${m.subject}`),
    });
    await backend.flush();
    const w = await mintWorker('w-rt');
    const worker = await connectWorker(w);
    expect((await worker.request('sonar.api.w.w-rt.renew', '{}')).string()).toBe(
      'answer to sonar.api.w.w-rt.renew',
    );
    const bootstrap = await connectRole('bootstrap');
    expect((await bootstrap.request('sonar.api.enroll', '{}')).string()).toBe(
      'answer to sonar.api.enroll',
    );
    // A supervisor's children enroll with its credential on the bootstrap prefix.
    const child = await connectRole('supervisor', { inboxPrefix: roleInboxPrefix('bootstrap') });
    expect((await child.request('sonar.api.enroll', '{}')).string()).toBe(
      'answer to sonar.api.enroll',
    );
    const supervisor = await connectRole('supervisor');
    expect((await supervisor.request('sonar.api.exited', '{}')).string()).toBe(
      'answer to sonar.api.exited',
    );
    for (const subject of ['sonar.api.join', 'sonar.api.w.w1.join', '$KV.sonar_workers.w1']) {
      expect(await publishOutcome(supervisor, subject), subject).toBe('denied');
    }
    await backend.close();
  });

  it('the bootstrap credential may only enroll', async () => {
    const nc = await connectRole('bootstrap');
    expect(await publishOutcome(nc, 'sonar.api.enroll')).toBe('allowed');
    for (const subject of [
      'sonar.api.join',
      'sonar.api.w.w1.join',
      '$JS.API.INFO',
      '$KV.sonar_workers.w1',
    ]) {
      expect(await publishOutcome(nc, subject), subject).toBe('denied');
    }
    expect(await subscribeOutcome(nc, '_INBOX.>')).toBe('denied');
    expect(await subscribeOutcome(nc, '_INBOX_W.w1.>')).toBe('denied');
  });

  it('a JWT that expires in 2 s gets its connection closed at expiry', async () => {
    const w = await mintWorker('w-exp', 2_000);
    const exp = decode(w.jwt).exp! * 1000;
    const nc = await connectWorker(w);
    await nc.flush();
    const closedAt = await eventually(() => nc.isClosed() && Date.now(), { timeoutMs: 6_000 });
    expect(closedAt).toBeGreaterThanOrEqual(exp - 1_000);
    // The same JWT is refused once its expiry second is over: the server's check is
    // `now > exp` in whole seconds, so during that second it still lets it connect.
    await eventually(() => Date.now() >= exp + 1_000, { timeoutMs: 3_000 });
    await expect(connectWorker(w)).rejects.toThrow(/authorization|expired/i);
  });

  it('a pushed revocation disconnects that worker at once, another stays up', async () => {
    const a = await mintWorker('w-rev-a');
    const b = await mintWorker('w-rev-b');
    const ncA = await connectWorker(a);
    const ncB = await connectWorker(b);
    await Promise.all([ncA.flush(), ncB.flush()]);
    const sys = await connectRole('sys');
    await pushRevocation({
      sys,
      accountPublicKey: secure().credentials.workersAccount.publicKey,
      operatorSigningSeed: await readFile(secure().operatorSigningKey, 'utf8'),
      userPublicKey: a.key.getPublicKey(),
      at: Date.now(),
      maxCredentialTtlMs: 60 * 60_000,
    });
    await eventually(() => ncA.isClosed(), { timeoutMs: 5_000 });
    expect(ncB.isClosed()).toBe(false);
    await ncB.flush();
    expect(await publishOutcome(ncB, 'sonar.api.w.w-rev-b.join')).toBe('allowed');
    await expect(connectWorker(a)).rejects.toThrow(/authorization/i);
    // The account JWT now carries the revocation, and kept its signing key and limits.
    const after = decode<{ revocations?: Record<string, number>; signing_keys?: unknown[] }>(
      await lookupAccountJwt(sys, secure().credentials.workersAccount.publicKey),
    );
    expect(Object.keys(after.nats.revocations ?? {})).toEqual([a.key.getPublicKey()]);
    expect(after.nats.signing_keys).toHaveLength(1);
    expect(after.nats).toHaveProperty('imports');
  });

  it('`sonar creds init DIR` writes the files and says which process takes each', async () => {
    const tmp = await mkdtemp(join(tmpdir(), 'sonar-creds-cli-'));
    try {
      const dir = join(tmp, 'creds');
      const r = await runSonar('creds init', ['creds', 'init', dir, '--prefix', 'acme'], {});
      expect(r.code, r.stderr).toBe(0);
      const lines = r.stdout.trim().split('\n');
      expect(lines[0]).toBe(`wrote ${dir} (prefix acme)`);
      expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(
        CREDENTIAL_FILE_USES.map((u) => u.file),
      );
      expect((await readdir(dir)).sort()).toEqual(CREDENTIAL_FILE_USES.map((u) => u.file).sort());
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  });
});
