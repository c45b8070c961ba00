/**
 * Projection snapshots after retention purged events (src/backend/snapshots/snapshot.ts): a purged run
 * lives only in the snapshot until its `RunExpired` is folded (and for good when a pass was
 * cut short before appending it), so an upgrade that changes machine code must not drop it.
 * Every case purges with the real retention sweep on a real nats-server, then stands in for
 * an upgrade (or a broken snapshot) by rewriting the stored object, and starts a new Backend.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { ObjectStore } from '@nats-io/obj';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Names } from '../../streams/names.js';
import { SNAPSHOT_FORMAT } from '../../src/backend/snapshots/snapshot-codec.js';
import {
  SNAPSHOT_OBJECT,
  SnapshotLossError,
  purgedEvents,
  snapshotFingerprint,
  writeSnapshot,
} from '../../src/backend/snapshots/snapshot.js';
import { silentLogger } from '../../src/log.js';
import type { Logger } from '../../src/log.js';
import { seedFinalizing } from '../helpers/finalize-fixtures.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { dumpProjection } from '../helpers/projection-dump.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { killAll, runSonar } from '../helpers/sonar-process.js';
import { DAY_MS, startSweepWorld, sweepNow } from '../helpers/sweep-world.js';
import type { TestBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();
let jsm: JetStreamManager;
const running: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  jsm = await jetstreamManager(nats.nc);
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
});
afterAll(async () => {
  await killAll();
});

const OTHER_BUILD = 'other-machine-code-0123456789abcd';

/**
 * A finished run `old` and a running run `live`. With `workerFirst`, a worker joins first, as
 * in a real stream: its events are never purged, so seq 1 stays and the purge leaves holes
 * only; without it, `old` holds the first events and the purge takes the stream's head.
 */
async function seed(w: TestBackend, workerFirst: boolean): Promise<void> {
  const n = w.ctx.names;
  if (workerFirst) {
    await w.write(n.subjects.worker('w1'), 'WorkerJoined', {
      workerId: 'w1',
      host: 'h',
      tags: ['linux'],
      slots: 1,
    });
  }
  await seedFinalizing(w.ctx.writer, n, { runId: 'old', taskIds: ['t1'] });
  await w.write(n.subjects.task('old', 't1'), 'TaskFinalized', {
    attemptId: 'a1',
    resultKey: 'old.t1',
  });
  await w.write(n.subjects.step('old', 's1'), 'StepSucceeded', {});
  await w.write(n.subjects.run('old'), 'RunSucceeded', {});
  await seedFinalizing(w.ctx.writer, n, { runId: 'live', taskIds: ['t1'] });
}

/** Seeds, then purges `old` with the retention sweep (31 days on); returns the world. */
async function purgedWorld(workerFirst: boolean): Promise<TestBackend> {
  const w = await startSweepWorld(nats.nc, nats.server.url);
  running.push(w);
  await seed(w, workerFirst);
  const report = await sweepNow(w, { shiftMs: 31 * DAY_MS });
  expect(report.retention).toMatchObject({ purged: ['old'], evicted: ['old'], skipped: null });
  const runEvents = await w.ctx.store.readAggregate(w.ctx.names.subjects.run('old'));
  expect(runEvents.map((r) => r.type)).toEqual(['RunExpired']);
  return w;
}

async function snapshots(n: Names): Promise<ObjectStore> {
  return new Objm(nats.nc).open(n.objectStores.snapshots);
}

/** The stored snapshot as JSON lines, and its object metadata. */
async function readStored(n: Names): Promise<{ lines: string[]; meta: Record<string, string> }> {
  const os = await snapshots(n);
  const info = await os.info(SNAPSHOT_OBJECT);
  const blob = await os.getBlob(SNAPSHOT_OBJECT);
  const lines = gunzipSync(blob!).toString('utf8').split('\n');
  return { lines, meta: { ...info!.metadata } };
}

async function putStored(n: Names, meta: Record<string, string>, bytes: Uint8Array) {
  await (await snapshots(n)).putBlob({ name: SNAPSHOT_OBJECT, metadata: meta }, bytes);
}

/**
 * Rewrites the stored snapshot as another build (other machine code, same format) would have
 * written it: its header and metadata carry another fingerprint; `editRow` may change rows.
 */
async function asOtherBuild(n: Names, editRow: (row: unknown[]) => unknown[] = (r) => r) {
  const { lines, meta } = await readStored(n);
  const [head, ...rows] = lines;
  const header = { ...(JSON.parse(head!) as object), fingerprint: OTHER_BUILD };
  const text = [
    JSON.stringify(header),
    ...rows.map((l) => (l === '' ? l : JSON.stringify(editRow(JSON.parse(l) as unknown[])))),
  ].join('\n');
  await putStored(n, { ...meta, fingerprint: OTHER_BUILD }, gzipSync(text));
}

/** A new backend on the world's prefix, as after an upgrade. */
async function restart(w: TestBackend, log: Logger, env: Record<string, string> = {}) {
  const backend = await startSweepWorld(nats.nc, nats.server.url, {
    prefix: w.ctx.names.prefix,
    log,
    env,
  });
  running.push(backend);
  return backend;
}

describe('projection snapshot after retention purged events', () => {
  it.each([
    { layout: 'purge took the stream head', workerFirst: false },
    { layout: 'purge left holes, seq 1 kept', workerFirst: true },
  ])(
    'another build’s snapshot is loaded when events were purged ($layout): it holds the purged run, the tail (its RunExpired included) is folded',
    async ({ workerFirst }) => {
      const w = await purgedWorld(workerFirst);
      const n = w.ctx.names;
      // The tail: events after the snapshot, folded by this build on restart.
      await seedFinalizing(w.ctx.writer, n, { runId: 'later', taskIds: ['t1'] });
      const before = dumpProjection(w.ctx.loop.projection);
      const state = (await jsm.streams.info(n.streams.events)).state;
      const purged = purgedEvents(state)!;
      expect(purged.count).toBeGreaterThan(0);
      if (workerFirst) expect(state.first_seq).toBe(1);
      else expect(state.first_seq).toBe(purged.count + 1);
      await w.stop();
      running.splice(running.indexOf(w), 1);
      const { meta } = await readStored(n);
      expect(meta['fingerprint']).toBe(snapshotFingerprint());
      await asOtherBuild(n);

      const { log, lines } = recordingLogger();
      const b = await restart(w, log);
      const warning = lines.find((l) => l.level === 'warn' && /other machine code/.test(l.msg));
      const purgedText = workerFirst
        ? `${purged.count} events`
        : `events up to seq ${state.first_seq - 1}`;
      expect(warning?.msg).toBe(
        `projection snapshot built by other machine code is used: ${purgedText} were purged ` +
          `and live only in it; the events after seq ${meta['seq']} are folded by this build`,
      );
      expect(lines.some((l) => l.msg === 'projection snapshot loaded')).toBe(true);
      const p = b.ctx.loop.projection;
      // The snapshot (written before the purge) held `old` whole; its RunExpired evicted it.
      expect(Number(meta['seq'])).toBeLessThan(p.expiredRuns.get('old')!.seq);
      expect(p.expiredRuns.get('old')?.state).toBe('Succeeded');
      expect(p.tasks.has('old.t1')).toBe(false);
      expect(p.runs.get('live')?.snapshot.value).toBe('Running');
      expect(p.tasks.get('later.t1')?.snapshot.value).toBe('Finalizing');
      expect(b.ctx.loop.position).toBeGreaterThan(Number(meta['seq']));
      expect(dumpProjection(p)).toStrictEqual(before);
    },
  );

  it('with nothing purged, another build’s snapshot is ignored and the stream replayed in full', async () => {
    const w = await startSweepWorld(nats.nc, nats.server.url);
    running.push(w);
    const n = w.ctx.names;
    await seed(w, true);
    const deps = { nc: nats.nc, jsm, names: n, log: silentLogger, loop: w.ctx.loop, nodeId: 'n1' };
    expect(await writeSnapshot(deps)).not.toBeNull();
    const before = dumpProjection(w.ctx.loop.projection);
    expect(purgedEvents((await jsm.streams.info(n.streams.events)).state)).toBeNull();
    // Another build's fold of `old` differs: loading it would show Failed.
    await asOtherBuild(n, (row) =>
      row[0] === 'run' && row[1] === 'old'
        ? [...row.slice(0, 3), { ...(row[3] as object), value: 'Failed' }]
        : row,
    );

    const { log, lines } = recordingLogger();
    const b = await restart(w, log);
    expect(
      lines.some(
        (l) =>
          l.level === 'warn' &&
          l.msg ===
            'projection snapshot not used: written by another version (other machine or fold code); replaying the whole stream',
      ),
    ).toBe(true);
    expect(lines.some((l) => l.msg === 'projection snapshot loaded')).toBe(false);
    expect(b.ctx.loop.projection.runs.get('old')?.snapshot.value).toBe('Succeeded');
    expect(dumpProjection(b.ctx.loop.projection)).toStrictEqual(before);
  });

  it('an unusable snapshot with a purged stream: Backend.start refuses (missing, other format, corrupt, truncated); SONAR_ALLOW_SNAPSHOT_LOSS=1 starts with only what the stream holds', async () => {
    const w = await purgedWorld(true);
    const n = w.ctx.names;
    await w.stop();
    running.splice(running.indexOf(w), 1);
    const { lines: good, meta } = await readStored(n);
    const purged = purgedEvents((await jsm.streams.info(n.streams.events)).state)!;
    const unusable: [string, () => Promise<unknown>][] = [
      [
        `written by another version (snapshot format ${SNAPSHOT_FORMAT + 1}, this build reads ${SNAPSHOT_FORMAT})`,
        () =>
          putStored(n, { ...meta, format: String(SNAPSHOT_FORMAT + 1) }, gzipSync(good.join('\n'))),
      ],
      ['unreadable', () => putStored(n, meta, new TextEncoder().encode('not gzip at all'))],
      ['corrupt', () => putStored(n, meta, gzipSync(good.slice(0, -2).join('\n')))],
      ['none stored', async () => (await snapshots(n)).delete(SNAPSHOT_OBJECT)],
    ];
    for (const [why, spoil] of unusable) {
      await spoil();
      const err = await restart(w, silentLogger).then(
        () => expect.fail(`started with a snapshot that is ${why}`),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SnapshotLossError);
      expect((err as Error).message).toBe(
        `projection snapshot unusable (${why}) while ${purged.count} events were purged from ` +
          `${n.streams.events}: runs whose events were purged live only in that snapshot and ` +
          'would be lost; restore a usable snapshot or run the build that wrote it, or set ' +
          'SONAR_ALLOW_SNAPSHOT_LOSS=1 to replay what is left anyway',
      );
    }

    // The real process: one error line, exit 1.
    const env = {
      SONAR_NATS_URL: nats.server.url,
      SONAR_PREFIX: n.prefix,
      SONAR_FINALIZE_LEASE: '1s',
    };
    const refused = await runSonar('backend', ['backend'], env);
    expect(refused.code).toBe(1);
    const plain = refused.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('{'));
    expect(plain).toEqual([expect.stringMatching(/^sonar: projection snapshot unusable \(none/)]);

    const { log, lines } = recordingLogger();
    const b = await restart(w, log, { SONAR_ALLOW_SNAPSHOT_LOSS: '1' });
    expect(
      lines.some(
        (l) =>
          l.level === 'warn' &&
          l.msg === 'projection snapshot not used: none stored; replaying the whole stream',
      ),
    ).toBe(true);
    expect(b.ctx.loop.projection.runs.has('old')).toBe(false);
    // An expired run's summary is in its RunExpired, which the purge left.
    expect(b.ctx.loop.projection.expiredRuns.get('old')?.state).toBe('Succeeded');
    expect(b.ctx.loop.projection.runs.get('live')?.snapshot.value).toBe('Running');
  });
});
