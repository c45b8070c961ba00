import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import type { Names } from '../../streams/names.js';
import { enqueueFinalization } from '../../streams/queues.js';
import { reenqueueLostFinalizations } from '../../src/backend/reconciler/lost-finalizations.js';
import { KvResultsSink } from '../../src/storage/results-sink.js';
import { eventually } from '../helpers/eventually.js';
import { startPoolBackend } from '../helpers/finalize-backend.js';
import {
  InstrumentedSink,
  countIn,
  enqueueAll,
  openWriter,
  seedFinalizing,
  stateOf,
  taskIds,
} from '../helpers/finalize-fixtures.js';
import type { TestWriter } from '../helpers/finalize-fixtures.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();
const children = new Set<ChildProcess>();

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

/**
 * `node bin/sonar.js backend`: the real backend process (API, reconciler, finalizer pool with
 * the default KV sink and output store), resolved once it logs `backend started`.
 */
async function spawnBackend(n: Names): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['bin/sonar.js', 'backend'], {
    env: {
      ...process.env,
      SONAR_NATS_URL: nats.server.url,
      SONAR_PREFIX: n.prefix,
      SONAR_FINALIZE_LEASE: '2s',
      SONAR_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let err = '';
  child.stderr.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (chunk: string) => {
      err = (err + chunk).slice(-20_000);
      if (err.includes('"msg":"backend started"')) resolve();
    });
    child.once('exit', (code) =>
      reject(new Error(`backend exited with ${code} before it started:\n${err}`)),
    );
  });
  return child;
}

/** TaskFinalized events per task key, from the whole events stream. */
async function finalizedCounts(w: TestWriter): Promise<Map<string, string[]>> {
  const counts = new Map<string, string[]>();
  await w.store.replay((r) => {
    if (r.type !== 'TaskFinalized') return;
    const key = r.subject.split('.').slice(-2).join('.');
    const list = counts.get(key) ?? [];
    list.push((r.data as { attemptId: string }).attemptId);
    counts.set(key, list);
  });
  return counts;
}

describe('a crash loses nothing', () => {
  it('SIGKILL of a backend mid-burst: every task ends with one TaskFinalized and one sink record of its current attempt', async () => {
    const n = await freshTopology(nats.nc, { finalizeLeaseMs: 2_000 });
    const w = await openWriter(nats.nc, n);
    const total = 5_000;
    const ids = taskIds(total);
    // Every tenth task was requeued once: its current attempt is a2, and a stale a1 job rides
    // in the burst beside the real one.
    const attemptsOf = (t: string) => (Number(t.slice(1)) % 10 === 0 ? 2 : 1);
    const jobs = await seedFinalizing(w.writer, n, { runId: 'burst', taskIds: ids, attemptsOf });
    const staleJobs = jobs
      .filter((j) => j.attemptId === 'a2')
      .map((j) => ({ ...j, attemptId: 'a1' }));
    const child = await spawnBackend(n);
    await enqueueAll(nats.nc, n, [...jobs, ...staleJobs]);
    await eventually(() => countIn(w.loop, 'burst', 'Succeeded') >= 1_000, { timeoutMs: 30_000 });
    child.kill('SIGKILL');
    await once(child, 'exit');
    const atKill = countIn(w.loop, 'burst', 'Succeeded');
    console.log(`backend SIGKILLed with ${atKill}/${total} tasks finalized`);
    expect(atKill).toBeLessThan(total);

    const kv = await KvResultsSink.open(nats.nc, n);
    const sink = new InstrumentedSink(kv);
    const b = await startPoolBackend(nats.nc, nats.server.url, n, { sink });
    try {
      await eventually(() => countIn(w.loop, 'burst', 'Succeeded') === total, {
        timeoutMs: 40_000,
      });
      const finalized = await finalizedCounts(w);
      for (const t of ids) {
        expect(finalized.get(`burst.${t}`)).toEqual([`a${attemptsOf(t)}`]);
      }
      const jsm = await jetstreamManager(nats.nc);
      const results = await jsm.streams.info(`KV_${n.buckets.results}`);
      // One key per task, and one write per task in all: no duplicate and no stale write.
      expect(results.state.messages).toBe(total);
      expect(results.state.last_seq).toBe(total);
      const records = await Promise.all(ids.map((t) => kv.get('burst', t)));
      records.forEach((r, i) => expect(r?.attemptId).toBe(`a${attemptsOf(ids[i]!)}`));
      expect(sink.calls.every((c) => c.attemptId === `a${attemptsOf(c.key.split('.')[1]!)}`)).toBe(
        true,
      );
      await eventually(
        async () => (await jsm.streams.info(n.streams.finalize)).state.messages === 0,
      );
    } finally {
      await b.stop();
      await w.stop();
    }
  });

  it('a crash between the two acceptance writes (no job enqueued): the reconciler re-enqueues, the task is finalized', async () => {
    const n = await freshTopology(nats.nc, { finalizeLeaseMs: 2_000 });
    const w = await openWriter(nats.nc, n);
    const sink = new InstrumentedSink(await KvResultsSink.open(nats.nc, n));
    const b = await startPoolBackend(nats.nc, nats.server.url, n, { sink });
    try {
      // TaskResultAccepted is appended, then the backend dies: no job for either task.
      const [, bare] = await seedFinalizing(w.writer, n, {
        runId: 'r1',
        taskIds: ['t1', 't2'],
      });
      expect(stateOf(w.loop, 'r1', 't1')).toBe('Finalizing');
      // The reconciler's re-enqueue (src/backend/reconciler/lost-finalizations.ts), one lease later.
      const jsm = await jetstreamManager(nats.nc);
      const requeued = await reenqueueLostFinalizations(
        { jsm, js: jetstream(nats.nc), names: n, projection: w.loop.projection },
        Date.now() + 2_001,
        2_000,
      );
      expect(requeued).toEqual(['r1.t1', 'r1.t2']);
      await eventually(() => stateOf(w.loop, 'r1', 't1') === 'Succeeded');
      expect(sink.callsFor('r1.t1')).toHaveLength(1);
      // A job that does not carry the inline bytes (an older re-enqueue, a hand-made one) is
      // finalized too: the accepted event holds them.
      const { outputInline: _dropped, ...noBytes } = bare!;
      await enqueueFinalization(jetstream(nats.nc), n, noBytes, 5);
      await eventually(() => stateOf(w.loop, 'r1', 't2') === 'Succeeded');
      expect((await KvResultsSink.open(nats.nc, n).then((k) => k.get('r1', 't2')))?.json).toEqual({
        taskId: 't2',
        ok: true,
      });
    } finally {
      await b.stop();
      await w.stop();
    }
  });
});
