import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedSink } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';

const world = finalizeWorldPerFile();
const { nats } = world;

const LEASE_MS = 1_000;
const env = { SONAR_FINALIZE_LEASE: '1s' };

/** Deliveries the consumer has made in all, redeliveries included. */
async function deliveries(stream: string, consumer: string): Promise<number> {
  const jsm = await jetstreamManager(nats.nc);
  return (await jsm.consumers.info(stream, consumer)).delivered.consumer_seq;
}

describe('lease renewal', () => {
  it('a job slower than ack_wait that keeps renewing is not redelivered', async () => {
    const s = await world.scene({ finalizeLeaseMs: LEASE_MS });
    const sink = new InstrumentedSink(s.kv);
    sink.delayMs = 3.5 * LEASE_MS;
    await s.startPool({ sink, env });
    await s.seedAndEnqueue({ runId: 'r1', taskIds: ['slow'] });
    await eventually(() => s.stateOf('r1', 'slow') === 'Succeeded', { timeoutMs: 10_000 });
    // Another lane of the same pool would have taken a redelivery: one call, none redelivered.
    expect(sink.calls).toHaveLength(1);
    expect(await deliveries(s.n.streams.finalize, s.n.consumers.finalizer)).toBe(1);
  });

  it('a job whose consumer dies is redelivered after the lease', async () => {
    const s = await world.scene({ finalizeLeaseMs: LEASE_MS });
    const { n, kv } = s;
    // Backend A, on a connection of its own, takes the job and hangs in the sink.
    const ncA = await world.connect();
    let release = () => {};
    const hung = new InstrumentedSink(kv);
    hung.hold = new Promise<void>((r) => (release = r));
    await s.startPool({ sink: hung, env, size: 1 }, ncA);
    await s.seedAndEnqueue({ runId: 'r1', taskIds: ['t1'] });
    await eventually(() => hung.calls.length === 1);
    // A renews the lease while it hangs: nothing is redelivered though the lease passes twice.
    const sinkB = new InstrumentedSink(kv);
    await s.startPool({ sink: sinkB, env });
    try {
      await eventually(() => performance.now() - hung.calls[0]!.at > 2 * LEASE_MS, {
        intervalMs: 100,
      });
      expect(sinkB.calls).toHaveLength(0);
      // A dies: its connection goes, with no nak and no more renewals.
      const diedAt = performance.now();
      await ncA.close();
      await eventually(() => s.stateOf('r1', 't1') === 'Succeeded', { timeoutMs: 10_000 });
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
      // A's hung sink call lets go, so the scene can stop A.
      release();
    }
  });
});
