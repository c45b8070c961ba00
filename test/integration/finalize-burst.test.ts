import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { describe, expect, it } from 'vitest';
import { KvResultsSink } from '../../src/storage/results-sink.js';
import { eventually } from '../helpers/eventually.js';
import type { TestBackend } from '../helpers/test-backend.js';
import {
  Gauge,
  InstrumentedOutputs,
  InstrumentedSink,
  ObjOutputStore,
  taskIds,
} from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import type { FinalizeScene } from '../helpers/finalize-world.js';
import type { FinalizeJob } from '../../streams/queues.js';

const world = finalizeWorldPerFile();

/** One process's instruments: sink writes, output reads, and both together. */
function instruments(kv: KvResultsSink, objects: ObjOutputStore, all: Gauge) {
  const io = new Gauge();
  const sink = new InstrumentedSink(kv, [io, all]);
  const outputs = new InstrumentedOutputs(objects, [io, all]);
  return { io, sink, outputs };
}

const TOTAL = 5_000;
/**
 * Every fifth output goes to the object store, so the burst also reads outputs (a get there
 * costs ~4 ms: more would only slow the test, not test more).
 */
const stored = (t: string) => Number(t.slice(1)) % 5 === 0;

/** Enqueues the burst's jobs and waits until every task succeeded: the seconds it took. */
async function finalizeBurst(s: FinalizeScene, jobs: FinalizeJob[]): Promise<number> {
  const started = performance.now();
  await s.enqueue(jobs);
  await eventually(() => s.countIn('burst', 'Succeeded') === TOTAL, { timeoutMs: 45_000 });
  return (performance.now() - started) / 1000;
}

describe('bounded concurrency', () => {
  it(`a burst of ${TOTAL} accepted results through a pool of 4: at most 4 sink writes and output reads at once`, async () => {
    const s = await world.scene({ finalizeLeaseMs: 5_000 });
    const objects = s.objects;
    const all = new Gauge();
    const one = instruments(s.kv, objects, all);
    const jobs = await s.seed({
      runId: 'burst',
      taskIds: taskIds(TOTAL),
      outputs: objects,
      stored,
    });
    const b = await s.startPool({
      sink: one.sink,
      outputStore: one.outputs,
      env: { SONAR_FINALIZERS: '4', SONAR_FINALIZE_LEASE: '5s' },
    });
    const secs = await finalizeBurst(s, jobs);
    console.log(
      `pool of 4: ${TOTAL} jobs in ${secs.toFixed(1)} s (${(TOTAL / secs).toFixed(0)}/s); ` +
        `max at once: sink writes ${one.sink.writes.max}, output reads ${one.outputs.reads.max}, both ${one.io.max}`,
    );
    expect(one.io.max).toBeLessThanOrEqual(4);
    expect(one.sink.writes.max).toBeLessThanOrEqual(4);
    expect(one.outputs.reads.max).toBeLessThanOrEqual(4);
    // The bound is reached, not just respected: the pool does run 4 at once.
    expect(one.io.max).toBe(4);
    expect(one.outputs.reads.max).toBeGreaterThan(0);
    expect(b.component(FinalizerPool).stats.finalized).toBe(TOTAL);
  });

  it(`two backends (pools of 4 on two connections): at most 8 at once, 4 each`, async () => {
    const s = await world.scene({ finalizeLeaseMs: 5_000 });
    const { n } = s;
    // Backend B on a connection of its own, as a second process would be.
    const nc2 = await world.connect();
    const all = new Gauge();
    const objects1 = s.objects;
    const a = instruments(s.kv, objects1, all);
    const b = instruments(await KvResultsSink.open(nc2, n), await ObjOutputStore.open(nc2, n), all);
    const jobs = await s.seed({
      runId: 'burst',
      taskIds: taskIds(TOTAL),
      outputs: objects1,
      stored,
    });
    const env = { SONAR_FINALIZERS: '4', SONAR_FINALIZE_LEASE: '5s' };
    const backends: TestBackend[] = [
      await s.startPool({ sink: a.sink, outputStore: a.outputs, env }),
      await s.startPool({ sink: b.sink, outputStore: b.outputs, env }, nc2),
    ];
    const secs = await finalizeBurst(s, jobs);
    console.log(
      `two pools of 4: ${TOTAL} jobs in ${secs.toFixed(1)} s (${(TOTAL / secs).toFixed(0)}/s); ` +
        `max at once: all ${all.max}, backend A ${a.io.max}, backend B ${b.io.max}; ` +
        `jobs A ${backends[0]!.component(FinalizerPool).stats.finalized}, B ${backends[1]!.component(FinalizerPool).stats.finalized}`,
    );
    expect(all.max).toBeLessThanOrEqual(8);
    expect(a.io.max).toBeLessThanOrEqual(4);
    expect(b.io.max).toBeLessThanOrEqual(4);
    expect(all.max).toBeGreaterThan(4);
    expect(
      backends[0]!.component(FinalizerPool).stats.finalized +
        backends[1]!.component(FinalizerPool).stats.finalized,
    ).toBe(TOTAL);
  });
});
