import { jetstream } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { describe, expect, it } from 'vitest';
import { replayView } from '../../actors/replay-view.js';
import type { Names } from '../../streams/names.js';
import { EventStore } from '../../streams/event-store.js';
import { EventWriter } from '../../src/backend/projection/event-writer.js';
import { ProjectionLoop } from '../../src/backend/projection/projection-loop.js';
import {
  SNAPSHOT_OBJECT,
  loadSnapshot,
  snapshotFingerprint,
  storedSnapshot,
  writeSnapshot,
} from '../../src/backend/snapshots/snapshot.js';
import { SNAPSHOT_FORMAT } from '../../src/backend/snapshots/snapshot-codec.js';
import { snapshotter } from '../../src/backend/snapshots/snapshotter.js';
import { silentLogger } from '../../src/log.js';
import type { Logger } from '../../src/log.js';
import { eventually } from '../helpers/eventually.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { startBackend } from '../helpers/test-backend.js';
import { dumpProjection } from '../helpers/projection-dump.js';
import { freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();

async function startLoop(n: Names, from?: Parameters<ProjectionLoop['start']>[0]) {
  const loop = new ProjectionLoop(new EventStore(nats.nc, n), silentLogger);
  await loop.start(from);
  return loop;
}

/**
 * Writes a small but varied history through the judging writer: two steps, tasks published,
 * started, requeued (worker-lost) and finished, a worker, an election; plus one undecodable
 * payload straight onto a task subject, which every fold must skip and count.
 */
async function history(n: Names, writer: EventWriter, from: number, tasks: number) {
  const run = `r${from}`;
  await writer.write({
    subject: n.subjects.worker(`w${from}`),
    type: 'WorkerJoined',
    data: { workerId: `w${from}`, host: 'h', tags: ['linux'], slots: 2 },
  });
  for (const stepId of ['a', 'b']) {
    await writer.write({
      subject: n.subjects.step(run, stepId),
      type: 'StepCreated',
      data: {
        runId: run,
        stepId,
        tags: ['linux'],
        after: stepId === 'b' ? ['a'] : [],
        taskCount: tasks,
      },
    });
  }
  const ids = Array.from({ length: tasks }, (_, i) => `t${i}`);
  for (const stepId of ['a', 'b']) {
    await writer.writeMany(
      ids.map((taskId) => ({
        subject: n.subjects.task(run, `${stepId}${taskId}`),
        type: 'TaskCreated' as const,
        data: { runId: run, stepId, taskId: `${stepId}${taskId}`, tags: ['linux'], maxAttempts: 3 },
      })),
    );
  }
  await writer.write({
    subject: n.subjects.run(run),
    type: 'RunSubmitted',
    data: { runId: run, stepIds: ['a', 'b'], taskCount: 2 * tasks },
  });
  for (const [i, taskId] of ids.entries()) {
    const subject = n.subjects.task(run, `a${taskId}`);
    const attemptId = `${run}${taskId}x1`;
    await writer.write({
      subject,
      type: 'TaskPublished',
      data: { attempt: 1, attemptId, tokenHash: 'ab'.repeat(32), tag: 'linux' },
    });
    if (i % 2 === 0) {
      await writer.write({
        subject,
        type: 'TaskStarted',
        data: { attemptId, workerId: `w${from}` },
      });
    }
    if (i % 3 === 0) {
      await writer.write({
        subject,
        type: 'TaskRequeued',
        data: { attemptId, reason: 'worker-lost', recoveries: 1 },
      });
    }
  }
  await jetstream(nats.nc).publish(n.subjects.task(run, 'junk'), 'not json');
}

describe('projection snapshots', () => {
  it('snapshot + tail equals a full replay: view, indexes and skipped count', async () => {
    const n = await freshTopology(nats.nc);
    const live = await startLoop(n);
    const writer = new EventWriter(new EventStore(nats.nc, n), live);
    await history(n, writer, 1, 20);
    const deps = {
      nc: nats.nc,
      jsm: nats.jsm,
      names: n,
      log: silentLogger,
      loop: live,
      nodeId: 'n1',
    };
    const written = await writeSnapshot(deps);
    expect(written?.seq).toBe(live.position);
    expect(await writeSnapshot(deps)).toBeNull(); // nothing newer to write

    await history(n, writer, 2, 15); // the tail
    const loaded = await loadSnapshot(deps);
    expect(loaded?.header.seq).toBe(written!.seq);
    const restored = await startLoop(n, loaded);
    const full = await startLoop(n);
    await live.waitFor(full.position);

    expect(restored.position).toBe(full.position);
    expect(restored.skipped).toBe(2);
    expect(full.skipped).toBe(2);
    expect(dumpProjection(restored.projection)).toStrictEqual(dumpProjection(full.projection));
    expect(replayView(restored.projection, [])).toStrictEqual(replayView(full.projection, []));
    expect(dumpProjection(live.projection)).toStrictEqual(dumpProjection(full.projection));
    await Promise.all([live.stop(), restored.stop(), full.stop()]);
  });

  it('falls back to a full replay, with a warning, when the snapshot is unusable', async () => {
    const n = await freshTopology(nats.nc);
    const live = await startLoop(n);
    await history(n, new EventWriter(new EventStore(nats.nc, n), live), 1, 5);
    const { log, lines } = recordingLogger();
    const deps = { nc: nats.nc, jsm: nats.jsm, names: n, log, loop: live, nodeId: 'n1' };
    const warned = (re: RegExp) => lines.some((l) => l.level === 'warn' && re.test(l.msg));

    expect(await loadSnapshot(deps)).toBeNull();
    expect(warned(/not used: none stored/)).toBe(true);

    const os = await new Objm(nats.nc).open(n.objectStores.snapshots);
    const put = (metadata: Record<string, string>, bytes: Uint8Array) =>
      os.putBlob({ name: SNAPSHOT_OBJECT, metadata }, bytes);
    const good = { seq: '1', fingerprint: snapshotFingerprint(), format: String(SNAPSHOT_FORMAT) };

    await put(good, new TextEncoder().encode('not gzip at all'));
    expect(await loadSnapshot(deps)).toBeNull();
    expect(warned(/not used: unreadable/)).toBe(true);

    await put({ ...good, fingerprint: 'older-build' }, new Uint8Array(1));
    expect(await loadSnapshot(deps)).toBeNull();
    expect(warned(/not used: written by another version/)).toBe(true);

    await put({ ...good, seq: '999999' }, new Uint8Array(1));
    expect(await loadSnapshot(deps)).toBeNull();
    expect(warned(/ahead of the events stream/)).toBe(true);

    // A whole snapshot whose end line was cut off: gzip of a truncated text.
    await os.delete(SNAPSHOT_OBJECT);
    await writeSnapshot(deps);
    const whole = await os.getBlob(SNAPSHOT_OBJECT);
    const { gunzipSync, gzipSync } = await import('node:zlib');
    const text = gunzipSync(whole!).toString('utf8').split('\n').slice(0, -3).join('\n');
    await put({ ...good, seq: String(live.position) }, gzipSync(text));
    expect(await loadSnapshot(deps)).toBeNull();
    expect(warned(/not used: corrupt/)).toBe(true);

    // And the backend still starts, from the stream.
    const full = await startLoop(n, await loadSnapshot(deps));
    expect(dumpProjection(full.projection)).toStrictEqual(dumpProjection(live.projection));
    await Promise.all([live.stop(), full.stop()]);
  });

  it('two writers at once: one snapshot lands, never an older one over a newer', async () => {
    const n = await freshTopology(nats.nc);
    const a = await startLoop(n);
    await history(n, new EventWriter(new EventStore(nats.nc, n), a), 1, 5);
    const b = await startLoop(n);
    const deps = (loop: ProjectionLoop, nodeId: string) => ({
      nc: nats.nc,
      jsm: nats.jsm,
      names: n,
      log: silentLogger,
      loop,
      nodeId,
    });
    const results = await Promise.all([writeSnapshot(deps(a, 'a')), writeSnapshot(deps(b, 'b'))]);
    expect(results.filter((r) => r !== null)).toHaveLength(1);
    expect((await storedSnapshot(deps(a, 'a')))?.seq).toBe(a.position);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('a backend snapshots as leader, on stop, and restarts from it', async () => {
    const n = await freshTopology(nats.nc);
    const start = (log: Logger) =>
      startBackend({
        url: nats.server.url,
        nc: nats.nc,
        prefix: n.prefix,
        log,
        nodeId: 'node-1',
        components: [snapshotter({ checkMs: 50, everyEvents: 20 })],
      });
    const first = await start(silentLogger);
    await first.ctx.writer.write({
      subject: n.subjects.system('reconciler'),
      type: 'ReconcilerElected',
      data: { nodeId: 'node-1' },
    });
    await history(n, first.ctx.writer, 1, 10);
    const deps = { nc: nats.nc, jsm: nats.jsm, names: n, log: silentLogger };
    await eventually(async () => expect((await storedSnapshot(deps))?.seq).toBeGreaterThan(20), {
      timeoutMs: 5_000,
    });
    await first.ctx.writer.write({
      subject: n.subjects.worker('w1'),
      type: 'WorkerLeft',
      data: {},
    });
    const position = first.ctx.loop.position;
    await first.stop();
    expect((await storedSnapshot(deps))?.seq).toBe(position); // written on stop

    const { log, lines } = recordingLogger();
    const second = await start(log);
    expect(lines.some((l) => l.msg === 'projection snapshot loaded')).toBe(true);
    const full = await startLoop(n);
    expect(dumpProjection(second.ctx.loop.projection)).toStrictEqual(
      dumpProjection(full.projection),
    );
    await second.stop();
    await full.stop();
  });
});
