/**
 * Batched finalization jobs: the inline-output jobs of results accepted together travel in one
 * message, and each keeps the single job's guarantees (one TaskFinalized, its own backoff,
 * poison and error history), and the reconciler still finds a job that was lost.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import type { Names } from '../../streams/names.js';
import { enqueueFinalizationBatch } from '../../streams/queues.js';
import type { FinalizeJob } from '../../streams/queues.js';
import { FailureLog } from '../../src/backend/finalize/failure-log.js';
import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { JobBatcher } from '../../src/backend/finalize/job-batcher.js';
import { reenqueueLostFinalizations } from '../../src/backend/reconciler/lost-finalizations.js';
import type { BatchedTasks } from '../../src/backend/reconciler/lost-finalizations.js';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedSink, taskIds } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import type { FinalizeScene } from '../helpers/finalize-world.js';

const world = finalizeWorldPerFile();
const { nats } = world;

async function queued(n: Names): Promise<Record<string, number>> {
  const jsm = await jetstreamManager(nats.nc);
  const info = await jsm.streams.info(n.streams.finalize, {
    subjects_filter: n.subjects.finalizeAll,
  });
  return info.state.subjects ?? {};
}

async function streamCount(stream: string): Promise<number> {
  const jsm = await jetstreamManager(nats.nc);
  return (await jsm.streams.info(stream)).state.messages;
}

async function enqueueBatch(s: FinalizeScene, jobs: FinalizeJob[], id = 'b1'): Promise<void> {
  const entries = jobs.map((j) => ({ ...j, round: 0 }));
  await enqueueFinalizationBatch(jetstream(nats.nc), s.n, { jobs: entries }, id);
}

async function typesOf(s: FinalizeScene, runId: string, taskId: string): Promise<string[]> {
  const events = await s.w.store.readAggregate(s.n.subjects.task(runId, taskId));
  return events.map((e) => String(e.type));
}

describe('the job batcher', () => {
  it('sends the inline jobs of one turn as one message, stored outputs and repeats alone', async () => {
    const s = await world.scene();
    const batcher = new JobBatcher(jetstream(nats.nc), s.n, 64, 512 * 1024);
    const jobs = await s.seed({ runId: 'r1', taskIds: taskIds(10, 't') });
    const stored = await s.seed({
      runId: 'r2',
      taskIds: ['s1'],
      stored: () => true,
      outputs: s.objects,
    });
    await Promise.all([
      ...jobs.map((j) => batcher.enqueue(j, 0)),
      batcher.enqueue(stored[0]!, 0),
      // An operator retry's round keeps the job's own msg id.
      batcher.enqueue({ ...jobs[0]!, taskId: 'again' }, 1),
    ]);
    const subjects = Object.entries(await queued(s.n));
    const batches = subjects.filter(([subject]) => subject.includes('._batch.'));
    expect(batches).toEqual([[expect.stringMatching(/^.*\.finalize\._batch\.\w+$/), 1]]);
    expect(subjects.map(([subject]) => subject).sort()).toEqual(
      [
        batches[0]![0],
        s.n.subjects.finalize('r1', 'again'),
        s.n.subjects.finalize('r2', 's1'),
      ].sort(),
    );
  });

  it('splits a turn at the job limit and at the byte limit; a limit of 1 sends single jobs', async () => {
    const s = await world.scene();
    const js = jetstream(nats.nc);
    const jobs = await s.seed({ runId: 'r1', taskIds: taskIds(10, 't') });
    const alone = new JobBatcher(js, s.n, 1, 1 << 20);
    await Promise.all(jobs.map((j) => alone.enqueue(j, 0)));
    const byFour = new JobBatcher(js, s.n, 4, 1 << 20);
    const more = await s.seed({ runId: 'r2', taskIds: taskIds(10, 't') });
    await Promise.all(more.map((j) => byFour.enqueue(j, 0)));
    const small = new JobBatcher(js, s.n, 64, 2_500);
    const big = await s.seed({
      runId: 'r3',
      taskIds: taskIds(6, 't'),
      outputFor: () => new TextEncoder().encode(JSON.stringify('x'.repeat(600))),
    });
    await Promise.all(big.map((j) => small.enqueue(j, 0)));
    const subjects = Object.keys(await queued(s.n));
    const singles = subjects.filter((x) => !x.includes('._batch.'));
    expect(singles).toHaveLength(10);
    // r2: 4 + 4 + 2; r3: two jobs of about 1.1 KB to a message of 2.5 KB: 3 messages.
    expect(subjects.filter((x) => x.includes('._batch.'))).toHaveLength(3 + 3);
  });
});

describe('a batch in the finalizer', () => {
  it('finalizes every job of a batch once, in one delivery', async () => {
    const s = await world.scene();
    const sink = new InstrumentedSink(s.kv);
    const b = await s.startPool({ sink });
    const jobs = await s.seed({ runId: 'r1', taskIds: taskIds(20, 't') });
    await enqueueBatch(s, jobs);
    await eventually(() => s.countIn('r1', 'Succeeded') === 20);
    for (const j of jobs) {
      const types = await typesOf(s, 'r1', j.taskId);
      expect(types.filter((t) => t === 'TaskFinalized')).toHaveLength(1);
      expect(await s.kv.get('r1', j.taskId)).toMatchObject({ attemptId: 'a1' });
    }
    expect(sink.calls).toHaveLength(20);
    await eventually(async () => Object.keys(await queued(s.n)).length === 0);
    expect(b.component(FinalizerPool).stats).toMatchObject({ finalized: 20, failed: 0 });
  });

  it('poisons a job with a permanent error at once; its batch-mates finalize', async () => {
    const s = await world.scene();
    await s.startPool();
    const jobs = await s.seed({
      runId: 'r1',
      taskIds: ['t1', 'bad', 't3'],
      outputFor: (id) => new TextEncoder().encode(id === 'bad' ? 'not json {' : '"ok"'),
    });
    await enqueueBatch(s, jobs);
    await eventually(
      () => s.countIn('r1', 'Succeeded') === 2 && s.stateOf('r1', 'bad') === 'Poisoned',
    );
    const history = await (await FailureLog.open(nats.nc, s.n)).history('r1', 'bad', 'a1');
    expect(history).toEqual([expect.objectContaining({ delivery: 1, permanent: true })]);
    await eventually(async () => Object.keys(await queued(s.n)).length === 0);
  });

  it('a failed batch waits its backoff, then its unfinished jobs go on alone, each to its own max_deliver', async () => {
    const s = await world.scene();
    const sink = new InstrumentedSink(s.kv);
    // `flaky` fails twice then works; `bad` always fails.
    sink.failWhen = (r, calls) => r.taskId === 'bad' || (r.taskId === 'flaky' && calls <= 2);
    await s.startPool({ sink, backoffBase: 100, backoffCap: 400 });
    const jobs = await s.seed({ runId: 'r1', taskIds: ['ok1', 'flaky', 'bad', 'ok2'] });
    await enqueueBatch(s, jobs);
    await eventually(() => s.stateOf('r1', 'bad') === 'Poisoned', { timeoutMs: 20_000 });
    expect(s.stateOf('r1', 'flaky')).toBe('Succeeded');
    expect(s.countIn('r1', 'Succeeded')).toBe(3);
    // The jobs that finished are not run again: one sink write each.
    expect(sink.callsFor('r1.ok1')).toHaveLength(1);
    expect(sink.callsFor('r1.ok2')).toHaveLength(1);
    // In the batch, then alone: the split comes after the batch's backoff.
    const flaky = sink.callsFor('r1.flaky').map((c) => c.at);
    expect(flaky).toHaveLength(3);
    expect(flaky[1]! - flaky[0]!).toBeGreaterThanOrEqual(90);
    expect(flaky[2]! - flaky[1]!).toBeGreaterThanOrEqual(90);
    // One try in the batch, then max_deliver (6) of its own.
    expect(sink.callsFor('r1.bad')).toHaveLength(7);
    for (const id of ['ok1', 'flaky', 'ok2']) {
      const types = await typesOf(s, 'r1', id);
      expect(types.filter((t) => t === 'TaskFinalized')).toHaveLength(1);
    }
    const events = await s.w.store.readAggregate(s.n.subjects.task('r1', 'bad'));
    expect(events.at(-1)).toMatchObject({ type: 'TaskPoisoned', data: { deliveries: 6 } });
    const failures = await FailureLog.open(nats.nc, s.n);
    expect((await failures.history('r1', 'bad', 'a1')).map((f) => f.delivery)).toEqual([
      1, 1, 2, 3, 4, 5, 6,
    ]);
    expect((await failures.history('r1', 'flaky', 'a1')).map((f) => f.delivery)).toEqual([1, 1]);
    await eventually(async () => Object.keys(await queued(s.n)).length === 0);
  });

  it('a batch taken by a backend that died is split on its next delivery, and every job finalized once', async () => {
    const s = await world.scene({ finalizeLeaseMs: 1_000 });
    const { n } = s;
    const jobs = await s.seed({ runId: 'r1', taskIds: taskIds(5, 't') });
    await enqueueBatch(s, jobs, 'dead');
    // Taken and never settled: the lease runs out, as when its backend is SIGKILLed.
    const consumer = await jetstream(nats.nc).consumers.get(
      n.streams.finalize,
      n.consumers.finalizer,
    );
    expect((await consumer.next({ expires: 2_000 }))?.info.deliveryCount).toBe(1);
    const sink = new InstrumentedSink(s.kv);
    const b = await s.startPool({ sink, env: { SONAR_FINALIZE_LEASE: '1s' } });
    await eventually(() => s.countIn('r1', 'Succeeded') === 5);
    expect(sink.calls).toHaveLength(5);
    for (const j of jobs) {
      expect((await typesOf(s, 'r1', j.taskId)).filter((t) => t === 'TaskFinalized')).toHaveLength(
        1,
      );
    }
    const jsm = await jetstreamManager(nats.nc);
    // The batch, then one single job for each of its five.
    expect((await jsm.streams.info(n.streams.finalize)).state.last_seq).toBe(6);
    await eventually(async () => (await streamCount(n.streams.finalize)) === 0);
    expect(b.component(FinalizerPool).stats).toMatchObject({ finalized: 5, failed: 0 });
  });

  it("a job poisoned in a batch and retried by an operator is its new round's business", async () => {
    const s = await world.scene({ finalizeLeaseMs: 500 });
    const { n } = s;
    const jobs = await s.seed({ runId: 'r1', taskIds: ['retried', 'mate'] });
    const task = n.subjects.task('r1', 'retried');
    await s.w.writer.write({
      subject: task,
      type: 'TaskPoisoned',
      data: { attemptId: 'a1', error: 'sink refused', deliveries: 1 },
    });
    await s.w.writer.write({
      subject: task,
      type: 'TaskFinalizeRetried',
      data: { attemptId: 'a1', by: 'operator' },
    });
    expect(s.stateOf('r1', 'retried')).toBe('Finalizing');
    // Its round-0 entry, still queued in the batch of its mate.
    await enqueueBatch(s, jobs);
    const deps = {
      jsm: await jetstreamManager(nats.nc),
      js: jetstream(nats.nc),
      names: n,
      projection: s.w.loop.projection,
    };
    // The entry is no job of round 1: the task's job counts as lost.
    expect(await reenqueueLostFinalizations(deps, Date.now() + 5_000, 500)).toEqual(['r1.retried']);
    const sink = new InstrumentedSink(s.kv);
    await s.startPool({ sink });
    await eventually(() => s.countIn('r1', 'Succeeded') === 2);
    // Run once, by its round-1 job: the batch's entry was dropped as stale.
    expect(sink.callsFor('r1.retried')).toHaveLength(1);
    expect((await typesOf(s, 'r1', 'retried')).filter((t) => t === 'TaskFinalized')).toHaveLength(
      1,
    );
  });

  it('a batch that ran out of deliveries while no backend was up: its unfinished jobs are poisoned', async () => {
    const s = await world.scene({ finalizeLeaseMs: 1_000, finalizeMaxDeliver: 2 });
    const { n } = s;
    const jobs = await s.seed({ runId: 'r1', taskIds: ['done', 'left'] });
    // `done` finished in an earlier delivery of the batch; `left` did not.
    await s.w.writer.write({
      subject: n.subjects.task('r1', 'done'),
      type: 'TaskFinalized',
      data: { attemptId: 'a1', resultKey: 'r1.done' },
    });
    await enqueueBatch(s, jobs);
    const consumer = await jetstream(nats.nc).consumers.get(
      n.streams.finalize,
      n.consumers.finalizer,
    );
    // Taken and never acked until the server gives up on it (see finalize-retry.test.ts).
    await eventually(async () => {
      await consumer.next({ expires: 1_000 });
      return (await streamCount(n.streams.advisories)) === 1;
    });
    await s.startPool({
      sink: new InstrumentedSink(null),
      env: { SONAR_FINALIZE_LEASE: '1s', SONAR_FINALIZE_MAX_DELIVER: '2' },
    });
    await eventually(() => s.stateOf('r1', 'left') === 'Poisoned');
    expect(s.stateOf('r1', 'done')).toBe('Succeeded');
    const events = await s.w.store.readAggregate(n.subjects.task('r1', 'left'));
    expect(events.at(-1)).toMatchObject({ type: 'TaskPoisoned', data: { deliveries: 2 } });
    await eventually(async () => (await streamCount(n.streams.finalize)) === 0);
    await eventually(async () => (await streamCount(n.streams.advisories)) === 0);
  });
});

describe('lost finalizations and batches', () => {
  it('a task whose job waits in a batch is not re-enqueued; once the batch is gone, it is', async () => {
    const s = await world.scene({ finalizeLeaseMs: 500 });
    const jobs = await s.seed({ runId: 'r1', taskIds: taskIds(3, 't') });
    await enqueueBatch(s, jobs);
    const deps = {
      jsm: await jetstreamManager(nats.nc),
      js: jetstream(nats.nc),
      names: s.n,
      projection: s.w.loop.projection,
    };
    const known: BatchedTasks = new Map();
    const later = Date.now() + 5_000;
    expect(await reenqueueLostFinalizations(deps, later, 500, { batches: known })).toEqual([]);
    expect([...known.values()]).toEqual([jobs.map((j) => `r1.${j.taskId}/a1/0`)]);
    // The batch lost (purged): every task of it is enqueued again, alone.
    await deps.jsm.streams.purge(s.n.streams.finalize);
    const again = await reenqueueLostFinalizations(deps, later, 500, { batches: known });
    expect(again.sort()).toEqual(jobs.map((j) => `r1.${j.taskId}`).sort());
    expect(known.size).toBe(0);
    expect(Object.keys(await queued(s.n)).sort()).toEqual(
      jobs.map((j) => s.n.subjects.finalize('r1', j.taskId)).sort(),
    );
  });
});
