import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import type { Names } from '../../streams/names.js';
import { FailureLog } from '../../src/backend/finalize/failure-log.js';
import type { PoisonRecord } from '../../src/backend/finalize/poisoner.js';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedSink, taskIds } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';

const world = finalizeWorldPerFile();
const { nats } = world;

async function streamMessages(stream: string): Promise<number> {
  const jsm = await jetstreamManager(nats.nc);
  return (await jsm.streams.info(stream)).state.messages;
}

async function lastPoison(n: Names, runId: string, taskId: string): Promise<PoisonRecord> {
  const jsm = await jetstreamManager(nats.nc);
  const m = await jsm.streams.getMessage(n.streams.poison, {
    last_by_subj: n.subjects.poison(runId, taskId),
  });
  return m!.json<PoisonRecord>();
}

describe('finalizer retries', () => {
  it('a flaky sink (fails twice, then works) finalizes the job after the backoff', async () => {
    const s = await world.scene();
    const sink = new InstrumentedSink(s.kv);
    sink.failWhen = (_r, calls) => calls <= 2;
    await s.startPool({ sink, backoffBase: 250 });
    await s.seedAndEnqueue({ runId: 'r1', taskIds: ['t1'] });
    await eventually(() => s.stateOf('r1', 't1') === 'Succeeded');
    const at = sink.callsFor('r1.t1').map((c) => c.at);
    expect(at).toHaveLength(3);
    const gaps = [at[1]! - at[0]!, at[2]! - at[1]!].map(Math.round);
    console.log(
      `flaky sink: attempts at +0, +${gaps[0]} ms, +${gaps[0]! + gaps[1]!} ms (base 250 ms)`,
    );
    // 1 x base, then 2 x base (a little early is the server's timer granularity).
    expect(gaps[0]).toBeGreaterThanOrEqual(240);
    expect(gaps[1]).toBeGreaterThanOrEqual(490);
    expect(gaps[1]).toBeGreaterThan(gaps[0]! * 1.5);
    const history = await (await FailureLog.open(nats.nc, s.n)).history('r1', 't1', 'a1');
    expect(history.map((f) => f.delivery)).toEqual([1, 2]);
    expect(history.every((f) => /sink refused/.test(f.error) && !f.permanent)).toBe(true);
  });

  it('an always-failing job is poisoned after max_deliver, with its error history', async () => {
    const s = await world.scene();
    const sink = new InstrumentedSink(null);
    sink.failWhen = () => true;
    await s.startPool({ sink, backoffBase: 50, backoffCap: 400 });
    await s.seedAndEnqueue({ runId: 'r1', taskIds: ['t1'] });
    await eventually(() => s.stateOf('r1', 't1') === 'Poisoned');
    expect(sink.callsFor('r1.t1')).toHaveLength(6);
    const events = await s.w.store.readAggregate(s.n.subjects.task('r1', 't1'));
    expect(events.at(-1)).toMatchObject({
      type: 'TaskPoisoned',
      data: { attemptId: 'a1', deliveries: 6, error: 'sink refused r1.t1' },
    });
    const record = await lastPoison(s.n, 'r1', 't1');
    expect(record.job).toMatchObject({ runId: 'r1', taskId: 't1', attemptId: 'a1' });
    expect(record.errors.map((e) => e.delivery)).toEqual([1, 2, 3, 4, 5, 6]);
    await eventually(async () => (await streamMessages(s.n.streams.finalize)) === 0);
  });

  it('while 100 poison jobs retry, good jobs flow at their normal rate', async () => {
    const s = await world.scene();
    const sink = new InstrumentedSink(s.kv);
    sink.failWhen = (r) => r.taskId.startsWith('bad');
    await s.startPool({ sink, backoffBase: 200 });
    const good = 1_000;
    const rate = async (runId: string, withPoison: boolean): Promise<number> => {
      const goodJobs = await s.seed({ runId, taskIds: taskIds(good, 'g') });
      if (withPoison) {
        await s.seedAndEnqueue({ runId: `${runId}bad`, taskIds: taskIds(100, 'bad') });
        // Every poison job has failed once and waits out its delay, holding no lane.
        await eventually(
          () =>
            new Set(sink.calls.filter((c) => c.key.includes('.bad')).map((c) => c.key)).size ===
            100,
        );
      }
      const started = performance.now();
      await s.enqueue(goodJobs);
      await eventually(() => s.countIn(runId, 'Succeeded') === good, {
        timeoutMs: 30_000,
      });
      return good / ((performance.now() - started) / 1000);
    };
    const alone = await rate('alone', false);
    const beside = await rate('beside', true);
    const badStillRetrying = s.countIn('besidebad', 'Finalizing');
    console.log(
      `good jobs/s: alone ${alone.toFixed(0)}, beside 100 retrying poison jobs ${beside.toFixed(0)} ` +
        `(${((beside / alone) * 100).toFixed(0)}%); poison jobs still retrying at the end: ${badStillRetrying}`,
    );
    expect(badStillRetrying).toBe(100);
    expect(beside).toBeGreaterThan(alone * 0.5);
  });

  it('a job that ran out of deliveries while no backend was up is poisoned from the captured advisory', async () => {
    const s = await world.scene({ finalizeLeaseMs: 1_000, finalizeMaxDeliver: 2 });
    const { n } = s;
    await s.seedAndEnqueue({ runId: 'r1', taskIds: ['t1'] });
    // A finalizer takes the job and dies each time (its lease runs out unacked), until the
    // server gives up on it and says so once; the advisories stream keeps that while no
    // backend is up. Counted by what the messages say, not by pulls: a pull that expires
    // as the server redelivers loses that delivery to its closed inbox.
    const consumer = await jetstream(nats.nc).consumers.get(
      n.streams.finalize,
      n.consumers.finalizer,
    );
    const deliveries: number[] = [];
    await eventually(async () => {
      const m = await consumer.next({ expires: 1_000 });
      if (m !== null) deliveries.push(m.info.deliveryCount);
      return (await streamMessages(n.streams.advisories)) === 1;
    });
    expect(deliveries.length).toBeGreaterThan(0);
    expect(deliveries.every((d) => d >= 1 && d <= 2)).toBe(true);
    expect(deliveries).toEqual([...deliveries].sort());
    expect(await streamMessages(n.streams.finalize)).toBe(1);
    await s.startPool({
      sink: new InstrumentedSink(null),
      env: { SONAR_FINALIZE_LEASE: '1s', SONAR_FINALIZE_MAX_DELIVER: '2' },
    });
    await eventually(() => s.stateOf('r1', 't1') === 'Poisoned');
    const events = await s.w.store.readAggregate(n.subjects.task('r1', 't1'));
    expect(events.at(-1)).toMatchObject({ type: 'TaskPoisoned', data: { deliveries: 2 } });
    await eventually(async () => (await streamMessages(n.streams.finalize)) === 0);
    await eventually(async () => (await streamMessages(n.streams.advisories)) === 0);
    expect((await lastPoison(n, 'r1', 't1')).job.taskId).toBe('t1');
  });
});
