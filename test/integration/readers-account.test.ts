/**
 * Clients and operators in the readers' account, on a real nats-server 2.9.10 in operator
 * mode with what `sonar creds init` makes, and a real `sonar backend`: a reader's credential
 * can read what its role reads and cannot make the server write anywhere in the account that
 * holds the streams, neither through the reply subject of a JetStream request nor through a
 * consumer's `deliver_subject`, nor by aiming answers at its own account's imports.
 */
import { readFile } from 'node:fs/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, credsAuthenticator } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManagerOf, jetstreamOf, jetstreamOptions } from '../../streams/jetstream-api.js';
import { names } from '../../streams/names.js';
import { roleInboxPrefix } from '../../src/auth/permissions.js';
import type { ReaderRole } from '../../src/auth/permissions.js';
import { eventually } from '../helpers/eventually.js';
import { publishOutcome } from '../helpers/permission-probes.js';
import { securePerFile } from '../helpers/secure-per-file.js';
import { killAll, spawnSonar } from '../helpers/sonar-process.js';
import type { SonarProcess } from '../helpers/sonar-process.js';

const secure = securePerFile();
const n = names('sonar');
const conns: NatsConnection[] = [];
let backend: SonarProcess;
let backendNc: NatsConnection;
const api = n.subjects.readerJsApi;

async function connectAs(role: ReaderRole | 'backend'): Promise<NatsConnection> {
  const nc = await connect({
    servers: secure().server.url,
    authenticator: credsAuthenticator(await readFile(secure().creds[role])),
    inboxPrefix: roleInboxPrefix(role),
    reconnect: false,
  });
  conns.push(nc);
  return nc;
}

/**
 * Where a forged write would show: the end of every stream that is not a bucket, and four
 * keys that must stay absent.
 */
async function landed(): Promise<{ ends: Record<string, number>; keys: string[] }> {
  const jsm = await jetstreamManager(backendNc);
  const ends: Record<string, number> = {};
  for (const stream of Object.values(n.streams)) {
    ends[stream] = (await jsm.streams.info(stream)).state.last_seq;
  }
  const keys: string[] = [];
  for (const [bucket, key] of TARGET_KEYS) {
    const kv = await new Kvm(backendNc).open(bucket);
    if ((await kv.get(key)) !== null) keys.push(`${bucket}/${key}`);
  }
  return { ends, keys };
}

const TARGET_KEYS = [
  [n.buckets.workers, 'forged'],
  [n.buckets.locks, 'forged'],
  [n.buckets.results, 'forged'],
  [n.buckets.progress, 'forged'],
] as const;

/** Subjects of the application account a reader must never make the server write onto. */
const STORED_TARGETS = [
  n.subjects.run('forged'),
  ...TARGET_KEYS.map(([bucket, key]) => `$KV.${bucket}.${key}`),
];

/** A consumer create as nats.js sends it, under the readers' API prefix. */
async function create(nc: NatsConnection, subject: string, config: Record<string, unknown>) {
  const answer = await nc.request(
    `${api}.CONSUMER.CREATE.${subject}`,
    JSON.stringify({ stream_name: subject.split('.')[0], config }),
    { timeout: 5_000 },
  );
  return answer.json<{ name?: string; error?: { description: string } }>();
}

beforeAll(async () => {
  backend = spawnSonar('backend', ['backend'], {
    ...secure().envFor('backend'),
    SONAR_LOG_LEVEL: 'debug',
  });
  await eventually(() => backend.stderr().includes('backend started') || !backend.running, {
    timeoutMs: 30_000,
  });
  expect(backend.running, backend.stderr()).toBe(true);
  backendNc = await connectAs('backend');
}, 60_000);

afterAll(async () => {
  await killAll();
  await Promise.all(conns.map((c) => c.close().catch(() => {})));
});

describe('readers in an account of their own (secure mode)', () => {
  it('a reader finds its API prefix and reads events, results and the registry through it', async () => {
    await jetstream(backendNc).publish(n.subjects.run('readers-r1'), '{"type":"probe"}');
    await (await new Kvm(backendNc).open(n.buckets.results)).put('readers-r1.t', '{"ok":1}');
    for (const role of ['client', 'operator'] as const) {
      const nc = await connectAs(role);
      expect(await jetstreamOptions(nc, n), role).toEqual({ apiPrefix: api });
      const js = await jetstreamOf(nc, n);
      const consumer = await js.consumers.get(n.streams.events, {
        filter_subjects: n.subjects.run('readers-r1'),
      });
      expect((await consumer.next({ expires: 2_000 }))?.subject, role).toBe(
        n.subjects.run('readers-r1'),
      );
      // Its role's reads only: results for a client, the registry for an operator.
      const bucket = role === 'client' ? n.buckets.results : n.buckets.workers;
      const other = role === 'client' ? n.buckets.workers : n.buckets.results;
      const keys = await new Kvm(js).open(bucket).then((kv) => kv.keys());
      for await (const _ of keys) void _;
      expect(await publishOutcome(nc, `${api}.STREAM.INFO.KV_${other}`), role).toBe('denied');
      // The application account's JetStream API is not reachable directly.
      expect(await publishOutcome(nc, `$JS.API.STREAM.INFO.${n.streams.events}`), role).toBe(
        'denied',
      );
    }
  });

  it('no answer to a reader’s request lands where it names: replies stay in the readers’ account', async () => {
    const before = await landed();
    for (const role of ['client', 'operator'] as const) {
      const nc = await connectAs(role);
      for (const reply of STORED_TARGETS) {
        nc.publish(`${api}.STREAM.INFO.${n.streams.events}`, undefined, { reply });
        nc.publish(`${api}.DIRECT.GET.${n.streams.events}`, '{"seq":1}', { reply });
        nc.publish(`${api}.CONSUMER.MSG.NEXT.${n.streams.events}.none`, '{"batch":1}', { reply });
      }
      await nc.flush();
    }
    await new Promise((r) => setTimeout(r, 500));
    expect(await landed()).toEqual(before);
  });

  it('a reader’s consumer is ephemeral, new, and delivers only into a reader’s inbox', async () => {
    const before = await landed();
    const client = await connectAs('client');
    for (const deliver of STORED_TARGETS) {
      const answer = await create(client, n.streams.events, {
        deliver_subject: deliver,
        ack_policy: 'none',
      });
      expect(answer.error?.description, deliver).toMatch(/deliver_subject/);
    }
    const durable = await create(client, `${n.streams.events}.mine`, {
      name: 'mine',
      durable_name: 'mine',
      ack_policy: 'none',
    });
    expect(durable.error?.description).toMatch(/durable_name/);
    // nats-server reads JSON keys without case: a key spelt otherwise is refused, not missed
    for (const key of ['Deliver_Subject', 'DELIVER_SUBJECT']) {
      const answer = await create(client, n.streams.events, {
        [key]: `$KV.${n.buckets.results}.forged`,
        ack_policy: 'none',
      });
      expect(answer.error?.description, key).toContain(`config.${key}`);
    }
    // and a repeated config is not merged: JetStream gets the create as checked
    const repeated = await client.request(
      `${api}.CONSUMER.CREATE.${n.streams.events}`,
      `{"stream_name":"${n.streams.events}","config":{"deliver_subject":"$KV.${n.buckets.results}.forged"},"config":{"ack_policy":"none","inactive_threshold":5000000000}}`,
      { timeout: 5_000 },
    );
    const made = repeated.json<{ config?: { deliver_subject?: string } }>();
    expect(made.config, JSON.stringify(made)).toBeDefined();
    expect(made.config?.deliver_subject).toBeUndefined();
    // An operator's consumer, then a client's create that would redirect it to itself.
    const operator = await connectAs('operator');
    const taken = await create(operator, `${n.streams.events}.taken`, {
      name: 'taken',
      ack_policy: 'none',
      inactive_threshold: 60e9,
    });
    expect(taken.error, JSON.stringify(taken)).toBeUndefined();
    const hijack = await create(client, `${n.streams.events}.taken`, {
      name: 'taken',
      ack_policy: 'none',
      deliver_subject: `${roleInboxPrefix('client')}.stolen`,
      inactive_threshold: 60e9,
    });
    expect(hijack.error?.description).toMatch(/already exists/);
    const info = await (
      await jetstreamManager(backendNc)
    ).consumers.info(n.streams.events, 'taken');
    expect(info.config.deliver_subject).toBeUndefined();
    await new Promise((r) => setTimeout(r, 300));
    expect(await landed()).toEqual(before);
  });

  it('answers aimed at the readers’ account’s own imports run nothing: the backend ignores them', async () => {
    // Bytes a reader did not write but can have answered anywhere: a consumer config whose
    // deliver subject is a stored key, and a cancel request.
    const forgedConfig = JSON.stringify({
      stream_name: n.streams.events,
      config: { deliver_subject: `$KV.${n.buckets.results}.forged`, ack_policy: 'none' },
    });
    await jetstream(backendNc).publish(n.subjects.run('readers-bytes'), forgedConfig);
    // A pull of a consumer with acks, aimed at a verb: its deliveries carry an ack reply.
    const operator = await connectAs('operator');
    const acked = await create(operator, `${n.streams.events}.acked`, {
      name: 'acked',
      ack_policy: 'explicit',
      inactive_threshold: 60e9,
    });
    expect(acked.error, JSON.stringify(acked)).toBeUndefined();
    operator.publish(`${api}.CONSUMER.MSG.NEXT.${n.streams.events}.acked`, '{"batch":3}', {
      reply: n.subjects.api('cancel'),
    });
    await operator.flush();
    // JetStream shows a delivery under its stream's subject, which names no verb: ignored
    await eventually(() =>
      backend
        .stderr()
        .split('\n')
        .some(
          (l) => l.includes('api messages ignored') && l.includes(`"subject":"${n.prefix}.events.`),
        ),
    );
    const before = await landed();
    const client = await connectAs('client');
    const get = JSON.stringify({ last_by_subj: n.subjects.run('readers-bytes') });
    for (const reply of [
      `${api}.CONSUMER.CREATE.${n.streams.events}`,
      n.subjects.api('cancel'),
      n.subjects.api('submit.begin'),
    ]) {
      client.publish(`${api}.DIRECT.GET.${n.streams.events}`, get, { reply });
    }
    await client.flush();
    await eventually(() => backend.stderr().includes('reader consumer messages ignored'));
    expect(backend.running).toBe(true);
    expect(await landed()).toEqual(before);
    // the server is still up, and a reader still reads
    const jsm = await jetstreamManagerOf(client, n);
    expect((await jsm.streams.info(n.streams.events)).config.name).toBe(n.streams.events);
  });
});
