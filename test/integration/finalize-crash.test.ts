import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import type { Names } from '../../streams/names.js';
import { enqueueFinalization } from '../../streams/queues.js';
import { reenqueueLostFinalizations } from '../../src/backend/reconciler/lost-finalizations.js';
import { KvResultsSink } from '../../src/storage/results-sink.js';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedSink, taskIds } from '../helpers/finalize-fixtures.js';
import type { TestWriter } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import { spawnSonar } from '../helpers/sonar-process.js';
import type { SonarProcess } from '../helpers/sonar-process.js';

const world = finalizeWorldPerFile();
const { nats } = world;

/**
 * `sonar backend`: the real backend process (API, reconciler, finalizer pool with the default
 * KV sink and output store), once it logs `backend started`.
 */
async function spawnBackend(n: Names): Promise<SonarProcess> {
  const backend = spawnSonar('backend', ['backend'], {
    SONAR_NATS_URL: nats.server.url,
    SONAR_PREFIX: n.prefix,
    SONAR_FINALIZE_LEASE: '2s',
  });
  const started = () => backend.stderr().includes('"msg":"backend started"');
  await eventually(() => started() || !backend.running, { timeoutMs: 30_000 });
  if (!started()) throw new Error(`backend exited before it started:\n${backend.stderr()}`);
  return backend;
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
    const s = await world.scene();
    const { n, w, kv } = s;
    const total = 5_000;
    const ids = taskIds(total);
    // Every tenth task was requeued once: its current attempt is a2, and a stale a1 job rides
    // in the burst beside the real one.
    const attemptsOf = (t: string) => (Number(t.slice(1)) % 10 === 0 ? 2 : 1);
    const jobs = await s.seed({ runId: 'burst', taskIds: ids, attemptsOf });
    const staleJobs = jobs
      .filter((j) => j.attemptId === 'a2')
      .map((j) => ({ ...j, attemptId: 'a1' }));
    const child = await spawnBackend(n);
    await s.enqueue([...jobs, ...staleJobs]);
    await eventually(() => s.countIn('burst', 'Succeeded') >= 1_000, { timeoutMs: 30_000 });
    await child.kill('SIGKILL');
    const atKill = s.countIn('burst', 'Succeeded');
    console.log(`backend SIGKILLed with ${atKill}/${total} tasks finalized`);
    expect(atKill).toBeLessThan(total);

    const sink = new InstrumentedSink(kv);
    await s.startPool({ sink });
    await eventually(() => s.countIn('burst', 'Succeeded') === total, {
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
    await eventually(async () => (await jsm.streams.info(n.streams.finalize)).state.messages === 0);
  });

  it('a crash between the two acceptance writes (no job enqueued): the reconciler re-enqueues, the task is finalized', async () => {
    const s = await world.scene();
    const { n, w } = s;
    const sink = new InstrumentedSink(s.kv);
    await s.startPool({ sink });
    // TaskResultAccepted is appended, then the backend dies: no job for either task.
    const [, bare] = await s.seed({ runId: 'r1', taskIds: ['t1', 't2'] });
    expect(s.stateOf('r1', 't1')).toBe('Finalizing');
    // The reconciler's re-enqueue (src/backend/reconciler/lost-finalizations.ts), one lease later.
    const jsm = await jetstreamManager(nats.nc);
    const requeued = await reenqueueLostFinalizations(
      { jsm, js: jetstream(nats.nc), names: n, projection: w.loop.projection },
      Date.now() + 2_001,
      2_000,
    );
    expect(requeued).toEqual(['r1.t1', 'r1.t2']);
    await eventually(() => s.stateOf('r1', 't1') === 'Succeeded');
    expect(sink.callsFor('r1.t1')).toHaveLength(1);
    // A job that does not carry the inline bytes (an older re-enqueue, a hand-made one) is
    // finalized too: the accepted event holds them.
    const { outputInline: _dropped, ...noBytes } = bare!;
    await enqueueFinalization(jetstream(nats.nc), n, noBytes, 5);
    await eventually(() => s.stateOf('r1', 't2') === 'Succeeded');
    expect((await KvResultsSink.open(nats.nc, n).then((k) => k.get('r1', 't2')))?.json).toEqual({
      taskId: 't2',
      ok: true,
    });
  });
});
