import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { KvResultsSink } from '../../src/storage/results-sink.js';
import { eventually } from '../helpers/eventually.js';
import { startPoolBackend } from '../helpers/finalize-backend.js';
import {
  InstrumentedSink,
  enqueueAll,
  openWriter,
  seedFinalizing,
  stateOf,
} from '../helpers/finalize-fixtures.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();

const LEASE_MS = 1_000;
const env = { SONAR_FINALIZE_LEASE: '1s' };

/** Deliveries the consumer has made in all, redeliveries included. */
async function deliveries(stream: string, consumer: string): Promise<number> {
  const jsm = await jetstreamManager(nats.nc);
  return (await jsm.consumers.info(stream, consumer)).delivered.consumer_seq;
}

describe('lease renewal', () => {
  it('a job slower than ack_wait that keeps renewing is not redelivered', async () => {
    const n = await freshTopology(nats.nc, { finalizeLeaseMs: LEASE_MS });
    const w = await openWriter(nats.nc, n);
    const sink = new InstrumentedSink(await KvResultsSink.open(nats.nc, n));
    sink.delayMs = 3.5 * LEASE_MS;
    const b = await startPoolBackend(nats.nc, nats.server.url, n, { sink, env });
    try {
      const jobs = await seedFinalizing(w.writer, n, { runId: 'r1', taskIds: ['slow'] });
      await enqueueAll(nats.nc, n, jobs);
      await eventually(() => stateOf(w.loop, 'r1', 'slow') === 'Succeeded', { timeoutMs: 10_000 });
      // Another lane of the same pool would have taken a redelivery: one call, none redelivered.
      expect(sink.calls).toHaveLength(1);
      expect(await deliveries(n.streams.finalize, n.consumers.finalizer)).toBe(1);
    } finally {
      await b.stop();
      await w.stop();
    }
  });

  it('a job whose consumer dies is redelivered after the lease', async () => {
    const n = await freshTopology(nats.nc, { finalizeLeaseMs: LEASE_MS });
    const w = await openWriter(nats.nc, n);
    const kv = await KvResultsSink.open(nats.nc, n);
    // Backend A, on a connection of its own, takes the job and hangs in the sink.
    const ncA = await connect({ servers: nats.server.url });
    let release = () => {};
    const hung = new InstrumentedSink(kv);
    hung.hold = new Promise<void>((r) => (release = r));
    const a = await startPoolBackend(ncA, nats.server.url, n, { sink: hung, env, size: 1 });
    const jobs = await seedFinalizing(w.writer, n, { runId: 'r1', taskIds: ['t1'] });
    await enqueueAll(nats.nc, n, jobs);
    await eventually(() => hung.calls.length === 1);
    // A renews the lease while it hangs: nothing is redelivered though the lease passes twice.
    const sinkB = new InstrumentedSink(kv);
    const b = await startPoolBackend(nats.nc, nats.server.url, n, { sink: sinkB, env });
    try {
      await eventually(() => performance.now() - hung.calls[0]!.at > 2 * LEASE_MS, {
        intervalMs: 100,
      });
      expect(sinkB.calls).toHaveLength(0);
      // A dies: its connection goes, with no nak and no more renewals.
      const diedAt = performance.now();
      await ncA.close();
      await eventually(() => stateOf(w.loop, 'r1', 't1') === 'Succeeded', { timeoutMs: 10_000 });
      const after = sinkB.calls[0]!.at - diedAt;
      console.log(
        `job redelivered ${after.toFixed(0)} ms after its consumer died (lease ${LEASE_MS} ms)`,
      );
      // The last renewal was at most a third of a lease before the death.
      expect(after).toBeGreaterThanOrEqual(LEASE_MS * 0.6);
      expect(sinkB.calls).toHaveLength(1);
      expect(await deliveries(n.streams.finalize, n.consumers.finalizer)).toBe(2);
      expect((await kv.get('r1', 't1'))?.attemptId).toBe('a1');
    } finally {
      release();
      await b.stop();
      await a.stop();
      await w.stop();
    }
  });
});
