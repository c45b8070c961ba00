/**
 * The shared-inbox publisher (streams/acked-publisher.ts) answers as `js.publish` does: the
 * ack's sequence, a repeated msg id as a duplicate, the server's refusals as errors, a
 * TimeoutError when no ack comes, a closed connection failing what waits at once, a draining
 * one refusing before sending, a permissions violation failing the publish at once. Many
 * publishes in flight each get their own ack, and acks come again after a server restart.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JetStreamApiError, JetStreamError, jetstreamManager } from '@nats-io/jetstream';
import {
  DrainingConnectionError,
  PermissionViolationError,
  TimeoutError,
  connect,
  headers,
} from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats } from '../../src/nats.js';
import { AckedPublisher } from '../../streams/acked-publisher.js';
import { eventually } from '../helpers/eventually.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();
const bytes = (s: string) => new TextEncoder().encode(s);

/**
 * A publisher on a connection of its own, for publishes to `subject` that nobody answers:
 * the file's connection listens there, so the server reports no "no responders".
 */
async function unansweredOn(subject: string) {
  const nc = await connect({ servers: nats.server.url });
  const silent = nats.nc.subscribe(subject);
  await nats.nc.flush();
  return { nc, silent, publisher: new AckedPublisher(nc, 60_000) };
}

describe('AckedPublisher', () => {
  it('gives each of many publishes in flight its own ack, in the stream order they were sent', async () => {
    const n = await freshTopology(nats.nc);
    const publisher = new AckedPublisher(nats.nc);
    const acks = await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        publisher.publish({
          subject: n.subjects.task('r1', `t${i}`),
          payload: bytes(`{"i":${i}}`),
          msgId: `m${i}`,
        }),
      ),
    );
    const seqs = acks.map((a) => a.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(500);
    expect(acks.every((a) => !a.duplicate)).toBe(true);
    expect(publisher.inFlight).toBe(0);
    const stored = await nats.jsm.streams.getMessage(n.streams.events, { seq: seqs[42]! });
    expect(stored?.subject).toBe(n.subjects.task('r1', 't42'));
    expect(stored?.header.get('Nats-Msg-Id')).toBe('m42');
  });

  it('answers a repeated msg id as a duplicate of the stored message', async () => {
    const n = await freshTopology(nats.nc);
    const publisher = new AckedPublisher(nats.nc);
    const m = { subject: n.subjects.task('r1', 't1'), payload: bytes('{}'), msgId: 'same' };
    const first = await publisher.publish(m);
    const again = await publisher.publish(m);
    expect(again).toEqual({ seq: first.seq, duplicate: true });
  });

  it('sends the expected last subject sequence, and a stale one is the server refusal 10071', async () => {
    const n = await freshTopology(nats.nc);
    const publisher = new AckedPublisher(nats.nc);
    const subject = n.subjects.task('r1', 't1');
    const first = await publisher.publish({
      subject,
      payload: bytes('{}'),
      msgId: 'a',
      expectedLastSubjectSeq: 0,
    });
    const stale = publisher.publish({
      subject,
      payload: bytes('{}'),
      msgId: 'b',
      expectedLastSubjectSeq: 0,
    });
    await expect(stale).rejects.toBeInstanceOf(JetStreamApiError);
    await expect(stale).rejects.toMatchObject({ code: 10071 });
    const next = await publisher.publish({
      subject,
      payload: bytes('{}'),
      msgId: 'c',
      expectedLastSubjectSeq: first.seq,
    });
    expect(next.seq).toBeGreaterThan(first.seq);
  });

  it('keeps the headers it is given beside its own', async () => {
    const n = await freshTopology(nats.nc);
    const publisher = new AckedPublisher(nats.nc);
    const h = headers();
    h.set('traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    const ack = await publisher.publish({
      subject: n.subjects.task('r1', 't1'),
      payload: bytes('{}'),
      msgId: 'traced',
      headers: h,
    });
    const stored = await nats.jsm.streams.getMessage(n.streams.events, { seq: ack.seq });
    expect(stored?.header.get('traceparent')).toBe(h.get('traceparent'));
    expect(stored?.header.get('Nats-Msg-Id')).toBe('traced');
  });

  it('fails a publish no stream takes (no responders), and goes on with the next', async () => {
    const n = await freshTopology(nats.nc);
    const publisher = new AckedPublisher(nats.nc);
    const lost = publisher.publish({ subject: 'nobody.listens', payload: bytes('{}'), msgId: 'x' });
    await expect(lost).rejects.toBeInstanceOf(JetStreamError);
    await expect(lost).rejects.toThrow(/no stream answered a publish to nobody\.listens/);
    const ack = await publisher.publish({
      subject: n.subjects.task('r1', 't1'),
      payload: bytes('{}'),
      msgId: 'y',
    });
    expect(ack.seq).toBeGreaterThan(0);
  });

  it('fails with a TimeoutError when no ack comes, and a late answer changes nothing', async () => {
    // A plain subscriber that never replies: the publish has a responder and no ack.
    const silent = nats.nc.subscribe('silent.subject', { max: 2 });
    const publisher = new AckedPublisher(nats.nc, 300);
    const started = performance.now();
    const first = publisher.publish({ subject: 'silent.subject', payload: bytes('1'), msgId: 'a' });
    await expect(first).rejects.toBeInstanceOf(TimeoutError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(publisher.inFlight).toBe(0);
    // Answering the timed-out publish now reaches nobody, and breaks nothing.
    for await (const m of silent) {
      m.respond(bytes('{"stream":"X","seq":9}'));
      break;
    }
    await nats.nc.flush();
    expect(publisher.inFlight).toBe(0);
    const n = await freshTopology(nats.nc);
    const ack = await publisher.publish({
      subject: n.subjects.task('r1', 't1'),
      payload: bytes('{}'),
      msgId: 'b',
    });
    expect(ack.seq).toBeGreaterThan(0);
    silent.unsubscribe();
  });

  it('fails what waits at once when its connection closes, and refuses publishes after', async () => {
    const { nc, silent, publisher } = await unansweredOn('silent.close');
    const waiting = publisher.publish({ subject: 'silent.close', payload: bytes('1'), msgId: 'a' });
    await nc.flush();
    const started = performance.now();
    await nc.close();
    await expect(waiting).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(publisher.inFlight).toBe(0);
    await expect(
      publisher.publish({ subject: 'silent.close', payload: bytes('2'), msgId: 'b' }),
    ).rejects.toThrow();
    silent.unsubscribe();
  });

  it('publishAll keeps at most its window in flight and fails every entry when the connection closes', async () => {
    const { nc, silent, publisher } = await unansweredOn('silent.all');
    const messages = Array.from({ length: 50 }, (_, i) => ({
      subject: 'silent.all',
      payload: bytes(`${i}`),
      msgId: `m${i}`,
    }));
    const all = publisher.publishAll(messages, 8);
    await nc.flush();
    // Nobody acks: the first window waits, the rest are not sent yet.
    expect(publisher.inFlight).toBe(8);
    await nc.close();
    const results = await all;
    expect(results).toHaveLength(50);
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(publisher.inFlight).toBe(0);
    silent.unsubscribe();
  });

  it('refuses a publish on a draining connection before sending it', async () => {
    const n = await freshTopology(nats.nc);
    const nc = await connect({ servers: nats.server.url });
    const publisher = new AckedPublisher(nc);
    const subject = n.subjects.task('r1', 'drained');
    await publisher.publish({ subject, payload: bytes('{}'), msgId: 'before' });
    const draining = nc.drain();
    await expect(
      publisher.publish({ subject, payload: bytes('{}'), msgId: 'during' }),
    ).rejects.toBeInstanceOf(DrainingConnectionError);
    await draining;
    // Nothing was stored for the refused one: its subject holds the first message only.
    const last = await nats.jsm.streams.getMessage(n.streams.events, { last_by_subj: subject });
    expect(last?.header.get('Nats-Msg-Id')).toBe('before');
  });

  it('answers again after the server restarts: the inbox is subscribed again', async () => {
    const n = await freshTopology(nats.nc);
    const nc = await connectNats({ natsUrl: nats.server.url });
    try {
      const publisher = new AckedPublisher(nc);
      const m = (id: string) => ({
        subject: n.subjects.task('r1', id),
        payload: bytes('{}'),
        msgId: id,
      });
      const first = await publisher.publish(m('a'));
      await nats.server.restart();
      await eventually(async () => {
        await nc.flush();
        await nats.nc.flush();
        return true;
      });
      // JetStream may answer "no responders" for a moment after the restart.
      const second = await eventually(() => publisher.publish(m('b')), { timeoutMs: 20_000 });
      expect(second.seq).toBeGreaterThan(first.seq);
      const again = await publisher.publish(m('c'));
      expect(again.seq).toBeGreaterThan(first.seq);
    } finally {
      await nc.close();
    }
  });
});

describe('AckedPublisher against permissions', () => {
  let dir: string;
  let server: NatsServer;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sonar-acked-perm-'));
    const config = join(dir, 'nats.conf');
    await writeFile(
      config,
      `jetstream { store_dir: ${JSON.stringify(join(dir, 'js'))} }
authorization { users = [
  { user: admin, password: admin }
  { user: limited, password: limited, permissions: {
      publish: { allow: ["allowed.>"] }, subscribe: { allow: ["_INBOX.>"] } } }
] }
`,
    );
    server = await startNatsServer({ config, storeDir: join(dir, 'js') });
  });

  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('fails a publish the account may not make at once, with the violation, not a timeout', async () => {
    const admin = await connect({ servers: server.url, user: 'admin', pass: 'admin' });
    const limited = await connect({ servers: server.url, user: 'limited', pass: 'limited' });
    try {
      const jsm = await jetstreamManager(admin);
      await jsm.streams.add({ name: 'PERM', subjects: ['allowed.>', 'denied.>'] });
      const publisher = new AckedPublisher(limited, 60_000);
      const started = performance.now();
      const refused = publisher.publish({ subject: 'denied.x', payload: bytes('1'), msgId: 'd' });
      await expect(refused).rejects.toBeInstanceOf(PermissionViolationError);
      await expect(refused).rejects.toMatchObject({ operation: 'publish', subject: 'denied.x' });
      expect(performance.now() - started).toBeLessThan(30_000);
      expect(publisher.inFlight).toBe(0);
      const ack = await publisher.publish({
        subject: 'allowed.x',
        payload: bytes('1'),
        msgId: 'a',
      });
      expect(ack).toEqual({ seq: 1, duplicate: false });
    } finally {
      await limited.close();
      await admin.close();
    }
  });
});
