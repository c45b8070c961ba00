import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvResultsSink } from '../../src/storage/results-sink.js';
import { eventually } from '../helpers/eventually.js';
import { startPoolBackend } from '../helpers/finalize-backend.js';
import type { TestBackend } from '../helpers/test-backend.js';
import {
  Gauge,
  InstrumentedOutputs,
  InstrumentedSink,
  ObjOutputStore,
  countIn,
  enqueueAll,
  openWriter,
  seedFinalizing,
  taskIds,
} from '../helpers/finalize-fixtures.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { freshTopology } from '../helpers/topology.js';

let server: NatsServer;
const conns: NatsConnection[] = [];

beforeAll(async () => {
  server = await startNatsServer();
});

afterAll(async () => {
  for (const c of conns) await c.close();
  await server?.stop();
});

async function conn(): Promise<NatsConnection> {
  const c = await connect({ servers: server.url });
  conns.push(c);
  return c;
}

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

describe('bounded concurrency', () => {
  it(`a burst of ${TOTAL} accepted results through a pool of 4: at most 4 sink writes and output reads at once`, async () => {
    const nc = await conn();
    const n = await freshTopology(nc, { finalizeLeaseMs: 5_000 });
    const w = await openWriter(nc, n);
    const objects = await ObjOutputStore.open(nc, n);
    const all = new Gauge();
    const one = instruments(await KvResultsSink.open(nc, n), objects, all);
    const jobs = await seedFinalizing(w.writer, n, {
      runId: 'burst',
      taskIds: taskIds(TOTAL),
      outputs: objects,
      stored,
    });
    const b = await startPoolBackend(nc, server.url, n, {
      sink: one.sink,
      outputStore: one.outputs,
      env: { SONAR_FINALIZERS: '4', SONAR_FINALIZE_LEASE: '5s' },
    });
    try {
      const started = performance.now();
      await enqueueAll(nc, n, jobs);
      await eventually(() => countIn(w.loop, 'burst', 'Succeeded') === TOTAL, {
        timeoutMs: 45_000,
      });
      const s = (performance.now() - started) / 1000;
      console.log(
        `pool of 4: ${TOTAL} jobs in ${s.toFixed(1)} s (${(TOTAL / s).toFixed(0)}/s); ` +
          `max at once: sink writes ${one.sink.writes.max}, output reads ${one.outputs.reads.max}, both ${one.io.max}`,
      );
      expect(one.io.max).toBeLessThanOrEqual(4);
      expect(one.sink.writes.max).toBeLessThanOrEqual(4);
      expect(one.outputs.reads.max).toBeLessThanOrEqual(4);
      // The bound is reached, not just respected: the pool does run 4 at once.
      expect(one.io.max).toBe(4);
      expect(one.outputs.reads.max).toBeGreaterThan(0);
      expect(b.component(FinalizerPool).stats.finalized).toBe(TOTAL);
    } finally {
      await b.stop();
      await w.stop();
    }
  });

  it(`two backends (pools of 4 on two connections): at most 8 at once, 4 each`, async () => {
    const [nc1, nc2] = [await conn(), await conn()];
    const n = await freshTopology(nc1, { finalizeLeaseMs: 5_000 });
    const w = await openWriter(nc1, n);
    const all = new Gauge();
    const objects1 = await ObjOutputStore.open(nc1, n);
    const a = instruments(await KvResultsSink.open(nc1, n), objects1, all);
    const b = instruments(await KvResultsSink.open(nc2, n), await ObjOutputStore.open(nc2, n), all);
    const jobs = await seedFinalizing(w.writer, n, {
      runId: 'burst',
      taskIds: taskIds(TOTAL),
      outputs: objects1,
      stored,
    });
    const env = { SONAR_FINALIZERS: '4', SONAR_FINALIZE_LEASE: '5s' };
    const backends: TestBackend[] = [
      await startPoolBackend(nc1, server.url, n, { sink: a.sink, outputStore: a.outputs, env }),
      await startPoolBackend(nc2, server.url, n, { sink: b.sink, outputStore: b.outputs, env }),
    ];
    try {
      const started = performance.now();
      await enqueueAll(nc1, n, jobs);
      await eventually(() => countIn(w.loop, 'burst', 'Succeeded') === TOTAL, {
        timeoutMs: 45_000,
      });
      const s = (performance.now() - started) / 1000;
      console.log(
        `two pools of 4: ${TOTAL} jobs in ${s.toFixed(1)} s (${(TOTAL / s).toFixed(0)}/s); ` +
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
    } finally {
      for (const x of backends) await x.stop();
      await w.stop();
    }
  });
});
