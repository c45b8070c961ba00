/**
 * The e2e performance work on its own terms: a submit's begin judged from the
 * projection still tells two run files apart when they race; worker requests share one
 * stream read; a connection's coalesced writes keep their order across a server restart; the
 * backend's own single writes come back without a second parse.
 */
import { connect } from '@nats-io/transport-node';
import { IllegalTransitionError } from '../../actors/errors.js';
import type { EventRecord } from '../../actors/projection.js';
import { ConcurrencyError } from '../../streams/errors.js';
import { encodeEnvelope } from '../../streams/envelope.js';
import { EventStore } from '../../streams/event-store.js';
import { describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import { runFileHash, validateRunFile } from '../../src/run-file.js';
import { syncRecent } from '../../src/backend/api/handlers/sync.js';
import { connectNats } from '../../src/nats.js';
import { coalesceWrites, inboxPrefixOf } from '../../streams/nats-internals.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { workerJoined } from '../helpers/event-builders.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { runFileOf } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);

describe('submit.begin without a stream scan', () => {
  it('two different files racing for one runId: never both accepted', async () => {
    const tb = await backends.start();
    const api = new ApiClient(nats.nc, tb.ctx.names, { retryForMs: 0 });
    const begin = (stepId: string) => {
      const file = validateRunFile(runFileOf('race', [{ id: stepId, tags: ['a'], count: 1 }]), {
        maxInputBytes: 256 * 1024,
      });
      return api.request('submit.begin', {
        runId: 'race',
        hash: runFileHash(file),
        steps: file.steps.map(({ tasks, ...s }) => ({ ...s, taskCount: tasks.length })),
        taskCount: 1,
      });
    };
    for (let round = 0; round < 5; round++) {
      const results = await Promise.allSettled([begin(`a${round}`), begin(`b${round}`)]);
      expect(results.filter((r) => r.status === 'fulfilled').length).toBeLessThanOrEqual(
        round === 0 ? 1 : 0,
      );
    }
  });

  it('a cut-short submit of the same file completes; commit lists steps in file order', async () => {
    const tb = await backends.start();
    const client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix });
    const file = runFileOf('r1', [
      { id: 'first', tags: ['a'], count: 2 },
      { id: 'second', tags: ['a'], count: 2 },
    ]);
    await expect(client.submit(file)).resolves.toEqual({ runId: 'r1', taskCount: 4 });
    await expect(client.submit(file)).resolves.toEqual({ runId: 'r1', taskCount: 4 });
    const run = tb.ctx.loop.projection.runs.get('r1')?.snapshot.context;
    expect(run?.stepIds).toEqual(['first', 'second']);
  });
});

describe('syncRecent', () => {
  it('calls that arrive together share one read; a call after it started gets its own', async () => {
    const tb = await backends.start();
    const { ctx } = tb;
    // The stream's end is read through the event store's own manager (EventStore.endSeq).
    const jsm = await ctx.store.jsm();
    const info = jsm.streams.info.bind(jsm.streams);
    let reads = 0;
    jsm.streams.info = (...args: Parameters<typeof info>) => {
      reads++;
      return info(...args);
    };
    try {
      await Promise.all(Array.from({ length: 50 }, () => syncRecent(ctx)));
      expect(reads).toBe(1);
      const first = syncRecent(ctx);
      await new Promise((resolve) => setImmediate(resolve)); // the first read has started
      await Promise.all([first, syncRecent(ctx)]);
      expect(reads).toBe(3);
    } finally {
      jsm.streams.info = info;
    }
  });
});

describe('coalesced writes', () => {
  it('keep publish order within and across turns, and across a server restart', async () => {
    const pub = await connectNats({ natsUrl: nats.server.url });
    const got: number[] = [];
    const sub = nats.nc.subscribe('order.test', {
      callback: (_err, m) => {
        got.push(Number(m.string()));
      },
    });
    try {
      await nats.nc.flush();
      let n = 0;
      const burst = async () => {
        for (let i = 0; i < 200; i++) {
          pub.publish('order.test', String(n++));
          if (i % 50 === 0) await Promise.resolve(); // a microtask boundary mid-burst
        }
        await pub.flush();
      };
      await burst();
      await burst();
      await eventually(() => got.length === 400);
      await nats.server.restart();
      await eventually(async () => {
        await pub.flush();
        return true;
      });
      await eventually(async () => {
        await nats.nc.flush();
        return true;
      });
      await burst();
      await eventually(() => got.length === 600, { timeoutMs: 15_000 });
      expect(got).toEqual(Array.from({ length: 600 }, (_, i) => i));
      // Request/reply still answers through the patched transport.
      const echo = pub.subscribe('echo.test', {
        callback: (_e, m) => {
          m.respond(m.data);
        },
      });
      await pub.flush();
      const reply = await nats.nc.request('echo.test', 'hi', { timeout: 2_000 });
      expect(reply.string()).toBe('hi');
      echo.unsubscribe();
    } finally {
      sub.unsubscribe();
      await pub.close();
    }
  });
});

describe('the nats.js fields Sonar reads privately', () => {
  it('still mean what the public behaviour shows: the transport patches, the inbox prefix', async () => {
    for (const inboxPrefix of [undefined, 'sonar.test_inbox']) {
      const conn = await connect({
        servers: nats.server.url,
        ...(inboxPrefix !== undefined && { inboxPrefix }),
      });
      try {
        // The transport is where coalesceWrites expects it (false would mean a silent no-op).
        expect(coalesceWrites(conn)).toBe(true);
        // The prefix read privately is the one nats.js puts on a request's reply subject.
        const seen: string[] = [];
        const sub = nats.nc.subscribe('inbox.test', {
          callback: (_e, m) => {
            seen.push(m.reply ?? '');
            m.respond(m.data);
          },
        });
        await nats.nc.flush();
        await conn.request('inbox.test', 'hi', { timeout: 2_000 });
        sub.unsubscribe();
        expect(inboxPrefixOf(conn)).toBe(inboxPrefix ?? '');
        expect(seen[0]?.startsWith(`${inboxPrefix ?? '_INBOX'}.`)).toBe(true);
      } finally {
        await conn.close();
      }
    }
  });
});

describe("a backend's own single writes", () => {
  it('come back applied as the event it judged, not parsed again; another writer is parsed', async () => {
    const tb = await backends.start();
    const s = tb.ctx.names.subjects;
    const seen: EventRecord[] = [];
    const off = tb.ctx.loop.onApplied((_a, r) => seen.push(r));
    try {
      const mine = workerJoined({ workerId: 'w-own' });
      await tb.ctx.writer.write({ subject: s.worker('w-own'), type: mine.type, data: mine.data });
      // Another process's writer: the same kind of event, by its bytes not this one's.
      const theirs = workerJoined({ workerId: 'w-other' });
      const other = new EventStore(nats.nc, tb.ctx.names);
      const { seq } = await other.append(
        s.worker('w-other'),
        { id: 'join.other', type: theirs.type, data: theirs.data },
        { expectedSeq: 0 },
      );
      await tb.ctx.loop.waitFor(seq);
      const bySubject = new Map(seen.map((r) => [r.subject, r]));
      expect(bySubject.get(s.worker('w-own'))?.validated).toBe(true);
      expect(bySubject.get(s.worker('w-other'))?.validated).toBeUndefined();
      expect(tb.ctx.loop.projection.workers.get('w-other')).toBeDefined();
      expect(tb.ctx.loop.ownWrites.size).toBe(0);
    } finally {
      off();
    }
  });

  it('are known by their bytes: another write to the same subject, same id, is parsed', async () => {
    const tb = await backends.start();
    const subject = tb.ctx.names.subjects.worker('w-same');
    const mine = workerJoined({ workerId: 'w-same', tags: ['mine'] });
    const expected = { id: 'join.same', type: mine.type, data: mine.data };
    const payload = encodeEnvelope(expected);
    // As the writer registers a write just before publishing it; another process wins.
    tb.ctx.loop.ownWrites.expect(subject, payload, expected);
    const seen: EventRecord[] = [];
    const off = tb.ctx.loop.onApplied((_a, r) => seen.push(r));
    try {
      const theirs = workerJoined({ workerId: 'w-same', tags: ['theirs'] });
      const { seq } = await new EventStore(nats.nc, tb.ctx.names).append(
        subject,
        { id: 'join.same', type: theirs.type, data: theirs.data },
        { expectedSeq: 0 },
      );
      await tb.ctx.loop.waitFor(seq);
      expect(seen.find((r) => r.subject === subject)?.validated).toBeUndefined();
      expect(tb.ctx.loop.projection.workers.get('w-same')?.snapshot.context.tags).toEqual([
        'theirs',
      ]);
      expect(tb.ctx.loop.ownWrites.size).toBe(1);
    } finally {
      off();
      tb.ctx.loop.ownWrites.forget(subject, payload);
    }
  });

  it('after a lost race are judged again: a refusal then names the race as its cause', async () => {
    const tb = await backends.start();
    const subject = tb.ctx.names.subjects.worker('w-race');
    const theirs = workerJoined({ workerId: 'w-race', tags: ['theirs'] });
    const mine = workerJoined({ workerId: 'w-race', tags: ['mine'] });
    // On the backend's own connection, so the server takes the other write first; the
    // writer judges before the loop can have seen it, and publishes expecting an empty subject.
    const other = new EventStore(tb.ctx.nc, tb.ctx.names).append(
      subject,
      { id: 'join.theirs', type: theirs.type, data: theirs.data },
      { expectedSeq: 0 },
    );
    const write = tb.ctx.writer.write({ subject, type: mine.type, data: mine.data });
    await other;
    const err = await write.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(IllegalTransitionError);
    expect((err as Error).cause).toBeInstanceOf(ConcurrencyError);
    expect(tb.ctx.loop.projection.workers.get('w-race')?.snapshot.context.tags).toEqual(['theirs']);
  });
});
