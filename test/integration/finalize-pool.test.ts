import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { enqueueFinalization } from '../../streams/queues.js';
import { FailureLog } from '../../src/backend/finalize/failure-log.js';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedSink } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import type { PoolBackendOptions } from '../helpers/finalize-backend.js';

const world = finalizeWorldPerFile();
const { nats } = world;

const encoder = new TextEncoder();

/** A scene whose pool writes through a recording KV sink and stores outputs in the object store. */
async function setup(poolOpts: PoolBackendOptions = {}) {
  const s = await world.scene();
  const sink = new InstrumentedSink(s.kv);
  const b = await s.startPool({ sink, outputStore: s.objects, ...poolOpts });
  return { ...s, sink, outputs: s.objects, b };
}

async function finalizeStreamMessages(stream: string): Promise<number> {
  const jsm = await jetstreamManager(nats.nc);
  return (await jsm.streams.info(stream)).state.messages;
}

describe('finalizer pool', () => {
  it('finalizes inline and stored outputs: one sink record per task, stamped with the attempt', async () => {
    const s = await setup();
    await s.seedAndEnqueue({
      runId: 'r1',
      taskIds: ['t1', 't2'],
      outputs: s.outputs,
      stored: (t) => t === 't2',
    });
    await eventually(() => ['t1', 't2'].every((t) => s.stateOf('r1', t) === 'Succeeded'));
    for (const t of ['t1', 't2']) {
      const rec = await s.kv.get('r1', t);
      expect(rec).toMatchObject({ runId: 'r1', taskId: t, attemptId: 'a1', kind: 'json' });
      expect(rec?.json).toEqual({ taskId: t, ok: true });
      const ctx = s.w.loop.projection.tasks.get(`r1.${t}`)!.snapshot.context;
      expect(ctx.resultKey).toBe(`r1.${t}`);
    }
    expect((await s.kv.get('r1', 't2'))?.outputRef).toBe('r1/t2/a1');
    await eventually(async () => (await finalizeStreamMessages(s.n.streams.finalize)) === 0);
  });

  it('acks and drops a duplicate job (a re-enqueue after the dedupe window) without a second write', async () => {
    const s = await setup();
    const [job] = await s.seedAndEnqueue({ runId: 'r1', taskIds: ['t1'] });
    await eventually(() => s.stateOf('r1', 't1') === 'Succeeded');
    // A new msg id gets past the 2-min dedupe window, as a late re-enqueue would.
    await enqueueFinalization(jetstream(nats.nc), s.n, job!, 7);
    await eventually(async () => (await finalizeStreamMessages(s.n.streams.finalize)) === 0);
    await eventually(() => s.b.component(FinalizerPool).stats.stale === 1);
    expect(s.sink.callsFor('r1.t1')).toHaveLength(1);
    const events = await s.w.store.readAggregate(s.n.subjects.task('r1', 't1'));
    expect(events.filter((e) => e.type === 'TaskFinalized')).toHaveLength(1);
  });

  it('a late job for an old attempt never writes the sink or moves the task', async () => {
    const s = await setup();
    const task = (type: Parameters<typeof s.w.writer.write>[0]['type'], data: unknown) =>
      s.w.writer.write({ subject: s.n.subjects.task('r1', 't1'), type, data });
    await task('TaskCreated', { runId: 'r1', stepId: 's1', taskId: 't1', tags: ['linux'] });
    await s.w.writer.write({
      subject: s.n.subjects.step('r1', 's1'),
      type: 'StepCreated',
      data: { runId: 'r1', stepId: 's1', tags: ['linux'], taskCount: 1, output: 'json' },
    });
    const hash = 'b'.repeat(64);
    await task('TaskPublished', { attempt: 1, attemptId: 'a1', tokenHash: hash, tag: 'linux' });
    await task('TaskStarted', { attemptId: 'a1', workerId: 'w1' });
    await task('TaskRequeued', { attemptId: 'a1', reason: 'worker-lost', recoveries: 1 });
    await task('TaskPublished', { attempt: 2, attemptId: 'a2', tokenHash: hash, tag: 'linux' });
    await task('TaskStarted', { attemptId: 'a2', workerId: 'w2' });
    const inline = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64');
    const oldJob = {
      runId: 'r1',
      taskId: 't1',
      attemptId: 'a1',
      outputRef: 'inline',
      outputInline: inline({ from: 'a1' }),
    };
    const js = jetstream(nats.nc);
    // While a2 runs: the a1 job is dropped.
    await enqueueFinalization(js, s.n, oldJob);
    await eventually(() => s.b.component(FinalizerPool).stats.stale === 1);
    expect(s.stateOf('r1', 't1')).toBe('Running');
    // a2 is accepted; its job and another late a1 job race.
    await task('TaskResultAccepted', {
      attemptId: 'a2',
      workerId: 'w2',
      outputRef: 'inline',
      outputBytes: 12,
      outputInline: inline({ from: 'a2' }),
    });
    await enqueueFinalization(js, s.n, oldJob, 1);
    await enqueueFinalization(js, s.n, {
      ...oldJob,
      attemptId: 'a2',
      outputInline: inline({ from: 'a2' }),
    });
    await eventually(() => s.stateOf('r1', 't1') === 'Succeeded');
    // And one more after the task succeeded.
    await enqueueFinalization(js, s.n, oldJob, 2);
    await eventually(async () => (await finalizeStreamMessages(s.n.streams.finalize)) === 0);
    await eventually(() => s.b.component(FinalizerPool).stats.stale === 3);
    expect(s.sink.calls.map((c) => c.attemptId)).toEqual(['a2']);
    expect(await s.kv.get('r1', 't1')).toMatchObject({ attemptId: 'a2', json: { from: 'a2' } });
    const events = await s.w.store.readAggregate(s.n.subjects.task('r1', 't1'));
    const finalized = events.filter((e) => e.type === 'TaskFinalized');
    expect(finalized.map((e) => (e.data as { attemptId: string }).attemptId)).toEqual(['a2']);
  });

  it('poisons at once a job whose output is invalid JSON or missing (permanent errors)', async () => {
    const s = await setup();
    const jobs = await s.seed({
      runId: 'r1',
      taskIds: ['bad', 'gone'],
      outputs: s.outputs,
      stored: (t) => t === 'gone',
      outputFor: (t) => encoder.encode(t === 'bad' ? '{not json' : '{}'),
    });
    await s.outputs.delete('r1/gone/a1');
    await s.enqueue(jobs);
    await eventually(() => ['bad', 'gone'].every((t) => s.stateOf('r1', t) === 'Poisoned'));
    const bad = s.w.loop.projection.tasks.get('r1.bad')!.snapshot.context;
    expect(bad.error).toMatch(/not valid JSON/);
    const gone = s.w.loop.projection.tasks.get('r1.gone')!.snapshot.context;
    expect(gone.error).toMatch(/missing from the output store/);
    const events = await s.w.store.readAggregate(s.n.subjects.task('r1', 'bad'));
    expect(events.at(-1)).toMatchObject({ type: 'TaskPoisoned', data: { deliveries: 1 } });
    // The job left the work queue; its record and error history are in SONAR_POISON.
    await eventually(async () => (await finalizeStreamMessages(s.n.streams.finalize)) === 0);
    const jsm = await jetstreamManager(nats.nc);
    const poison = await jsm.streams.getMessage(s.n.streams.poison, {
      last_by_subj: s.n.subjects.poison('r1', 'bad'),
    });
    const record = poison!.json<{
      job: { attemptId: string };
      errors: { permanent: boolean }[];
    }>();
    expect(record.job.attemptId).toBe('a1');
    expect(record.errors).toHaveLength(1);
    expect(record.errors[0]!.permanent).toBe(true);
    const history = await (await FailureLog.open(nats.nc, s.n)).history('r1', 'bad', 'a1');
    expect(history).toHaveLength(1);
    expect(s.sink.calls).toHaveLength(0);
  });
});
