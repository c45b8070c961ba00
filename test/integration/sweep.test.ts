import { jetstream } from '@nats-io/jetstream';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { applyEvent } from '../../actors/projection.js';
import { ensureDispatchConsumer } from '../../streams/provision.js';
import {
  DISPATCH_CONSUMER_RECHECK_MS,
  DispatchConsumers,
} from '../../src/backend/reconciler/dispatch-consumers.js';
import { enqueueFinalization, publishDispatch } from '../../streams/queues.js';
import type { BackendContext } from '../../src/backend/context.js';
import { apiHandlers } from '../../src/backend/api/handlers/index.js';
import { loadSnapshot } from '../../src/backend/snapshots/snapshot.js';
import type { SweepReport } from '../../src/backend/sweep/full-sweep.js';
import { FULL_SWEEP_KEY, claimSweepTurn } from '../../src/backend/sweep/sweep-claim.js';
import { Sweeper } from '../../src/backend/sweep/sweeper.js';
import { silentLogger } from '../../src/log.js';
import { KvResultsSink, bodyOf } from '../../src/storage/results-sink.js';
import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { FailureLog } from '../../src/backend/finalize/failure-log.js';
import { scanStream } from '../../src/backend/storage/stream-scan.js';
import { eventually } from '../helpers/eventually.js';
import { ObjOutputStore, seedFinalizing, stateOf } from '../helpers/finalize-fixtures.js';
import { pulse, workersBucket } from '../helpers/reconciler-backend.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { DAY_MS, sweepNow, sweepWorldsPerTest } from '../helpers/sweep-world.js';
import { freshPrefix } from '../helpers/topology.js';
import type { TestBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();

const world = sweepWorldsPerTest(nats);

/** Subjects of every message now in a stream (read as the sweep reads it). */
async function subjectsIn(stream: string, filter: string): Promise<string[]> {
  const out: string[] = [];
  for await (const m of scanStream(nats.jsm, stream, filter)) out.push(m.subject);
  return out;
}

const HASH = 'b'.repeat(64);

/** A run of one step whose tasks are created and the run submitted: every task Pending. */
async function pendingTasks(w: TestBackend, runId: string, taskIds: string[]): Promise<void> {
  const n = w.ctx.names;
  for (const taskId of taskIds) {
    await w.write(n.subjects.task(runId, taskId), 'TaskCreated', {
      runId,
      stepId: 's1',
      taskId,
      tags: ['linux'],
    });
  }
  await w.write(n.subjects.step(runId, 's1'), 'StepCreated', {
    runId,
    stepId: 's1',
    tags: ['linux'],
    after: [],
    taskCount: taskIds.length,
  });
  await w.write(n.subjects.run(runId), 'RunSubmitted', {
    runId,
    stepIds: ['s1'],
    taskCount: taskIds.length,
  });
}

describe('the full sweep', () => {
  it('purges dispatch messages whose attempt is no longer current, and keeps the current one', async () => {
    const w = await world();
    const n = w.ctx.names;
    const js = jetstream(nats.nc);
    await pendingTasks(w, 'r1', ['t1', 't2']);
    const task = n.subjects.task('r1', 't1');
    const body = (attemptId: string, taskId = 't1') => ({
      runId: 'r1',
      stepId: 's1',
      taskId,
      attempt: 1,
      attemptId,
      token: 'x',
    });
    /** Attempt `attempt` of `taskId` published on `tag`, its dispatch message with it. */
    const publish = async (taskId: string, tag: string, attempt: number, attemptId: string) => {
      const subject = n.subjects.task('r1', taskId);
      await w.write(subject, 'TaskPublished', { attempt, attemptId, tokenHash: HASH, tag });
      await publishDispatch(w.ctx.publisher, n, tag, body(attemptId, taskId));
    };
    // t1: attempt a1 published, then requeued before any worker took it; a2 is current.
    await publish('t1', 'linux', 1, 'a1');
    await w.write(task, 'TaskRequeued', { attemptId: 'a1', reason: 'operator' });
    await publish('t1', 'linux', 2, 'a2');
    // t2: cancelled while its message waited on a tag nobody pulls any more.
    const t2 = n.subjects.task('r1', 't2');
    await publish('t2', 'gpu', 1, 'b1');
    await w.write(t2, 'TaskCancelled', { reason: 'test' });
    // Not a dispatch message at all.
    await js.publish(n.subjects.dispatch('linux'), 'not json');

    const report = await sweepNow(w);
    expect(report.staleDispatch).toEqual({ checked: 4, purged: 3 });
    expect(report.failed).toEqual([]);
    const left = [];
    for await (const m of scanStream(nats.jsm, n.streams.dispatch, n.subjects.dispatchAll)) {
      left.push(m.json<{ attemptId: string }>().attemptId);
    }
    expect(left).toEqual(['a2']);
  });

  it('re-enqueues the job of a Finalizing task that has none, even inside the dedupe window of its lost original', async () => {
    const w = await world();
    const n = w.ctx.names;
    const js = jetstream(nats.nc);
    const [job] = await seedFinalizing(w.ctx.writer, n, { runId: 'r1', taskIds: ['t1'] });
    // The job was enqueued with its usual id and then lost (deleted): inside the 2-minute
    // window a re-enqueue with that id (the reconciler's) is a duplicate that stores nothing.
    const original = await enqueueFinalization(js, n, job!);
    await nats.jsm.streams.deleteMessage(n.streams.finalize, original.seq, false);
    expect((await enqueueFinalization(js, n, job!)).duplicate).toBe(true);

    // One lease after the acceptance (the clock moved on), the sweep re-enqueues it.
    const report = await sweepNow(w, { shiftMs: 5_000 });
    expect(report.lostFinalizations.reenqueued).toEqual(['r1.t1']);
    // A second sweep finds the job queued: nothing more.
    expect((await sweepNow(w, { shiftMs: 5_000 })).lostFinalizations.reenqueued).toEqual([]);
    // The reconciler and a sweep may both re-enqueue (distinct ids): a duplicate is a no-op.
    await enqueueFinalization(js, n, job!, 0, 'a-duplicate');
    const kv = await KvResultsSink.open(nats.nc, n);
    const pool = new FinalizerPool(w.ctx, { sink: kv });
    await pool.start();
    try {
      await eventually(() => stateOf(w.ctx.loop, 'r1', 't1') === 'Succeeded');
      await eventually(
        async () => (await nats.jsm.streams.info(n.streams.finalize)).state.messages === 0,
      );
      const finalized = await w.ctx.store.readAggregate(n.subjects.task('r1', 't1'));
      expect(finalized.filter((e) => e.type === 'TaskFinalized')).toHaveLength(1);
      // One record, of the current attempt (two jobs at once may both upsert the same one).
      expect((await kv.get('r1', 't1'))?.attemptId).toBe('a1');
    } finally {
      await pool.stop();
    }
  });

  it('moves jobs stuck past max_deliver to poison: proven by their error history or by a captured advisory', async () => {
    // No finalizer pool: the test plays the deliveries itself, with a 2-delivery limit.
    const w = await world({
      env: { SONAR_FINALIZE_MAX_DELIVER: '2', SONAR_FINALIZE_LEASE: '300ms' },
    });
    const n = w.ctx.names;
    const js = jetstream(nats.nc);
    const jobs = await seedFinalizing(w.ctx.writer, n, { runId: 'r1', taskIds: ['t1', 't2'] });
    const consumer = await js.consumers.get(n.streams.finalize, n.consumers.finalizer);
    /** Delivers the queue's jobs until none comes any more: each ran out of deliveries. */
    const exhaust = async (): Promise<number[]> => {
      const deliveries: number[] = [];
      await eventually(async () => {
        const m = await consumer.next({ expires: 1_000 });
        if (m) deliveries.push(m.info.deliveryCount); // never acked: the lease runs out
        const info = await nats.jsm.consumers.info(n.streams.finalize, n.consumers.finalizer);
        return m === null && info.num_ack_pending === 0 && info.num_pending === 0;
      });
      return deliveries;
    };
    // t1: both deliveries failed, and the finalizer's poison step failed too (only the errors
    // were recorded); its advisory was lost.
    await enqueueFinalization(js, n, jobs[0]!);
    expect(await exhaust()).toEqual([1, 2]);
    const failures = await FailureLog.open(nats.nc, n);
    for (const delivery of [1, 2]) {
      await failures.record(jobs[0]!, {
        error: `sink down (${delivery})`,
        at: new Date().toISOString(),
        delivery,
        round: 0,
        permanent: false,
        by: 'test',
      });
    }
    await eventually(
      async () => (await nats.jsm.streams.info(n.streams.advisories)).state.messages === 1,
    );
    await nats.jsm.streams.purge(n.streams.advisories);
    // t2: its leases ran out twice (a backend dying on it); the advisory is captured, no
    // watcher runs.
    await enqueueFinalization(js, n, jobs[1]!);
    expect(await exhaust()).toEqual([1, 2]);
    await eventually(
      async () => (await nats.jsm.streams.info(n.streams.advisories)).state.messages === 1,
    );

    const report = await sweepNow(w);
    expect(report.stuckJobs).toEqual({ stuck: 2, poisoned: 2, dropped: 0, unidentified: 0 });
    expect(stateOf(w.ctx.loop, 'r1', 't1')).toBe('Poisoned');
    expect(stateOf(w.ctx.loop, 'r1', 't2')).toBe('Poisoned');
    expect(await subjectsIn(n.streams.finalize, n.subjects.finalizeAll)).toEqual([]);
    expect(await subjectsIn(n.streams.advisories, n.subjects.maxDeliveriesAdvisory)).toEqual([]);
    expect(await subjectsIn(n.streams.poison, n.subjects.poisonAll)).toEqual([
      n.subjects.poison('r1', 't1'),
      n.subjects.poison('r1', 't2'),
    ]);
    const record = await nats.jsm.streams.getMessage(n.streams.poison, {
      last_by_subj: n.subjects.poison('r1', 't1'),
    });
    expect(record!.json<{ errors: unknown[]; error: string }>()).toMatchObject({
      error: 'sink down (2)',
      errors: [{ delivery: 1 }, { delivery: 2 }],
    });
    // Nothing is stuck any more: the next sweep reads nothing.
    expect((await sweepNow(w)).stuckJobs.stuck).toBe(0);
  });

  it('deletes dispatch consumers of tags no live worker advertised for a day, and loses joined workers whose key is gone', async () => {
    const w = await world();
    const n = w.ctx.names;
    for (const tag of ['linux', 'arm']) await ensureDispatchConsumer(nats.jsm, n, tag);
    // Made sure of by this backend (as its leader does before publishing): a cached fact.
    await w.ctx.dispatchConsumers.ensure('gpu');
    const joined = (workerId: string, tags: string[]) =>
      w.write(n.subjects.worker(workerId), 'WorkerJoined', { workerId, host: 'h', tags, slots: 1 });
    await joined('w1', ['gpu']); // left: gpu was last advertised when it left
    await w.write(n.subjects.worker('w1'), 'WorkerLeft', {});
    await joined('w2', ['linux']); // live: its key is in the registry
    await pulse(await workersBucket(nats.nc, n.prefix), 'w2', { tags: ['linux'] });
    await joined('w3', ['linux']); // joined, but its key is gone and no event says so
    // 'arm': a consumer no worker ever advertised.

    // Just back from an outage: no worker could pulse, so none is judged, and no consumer
    // is deleted for want of live workers.
    const early = await sweepNow(w, { shiftMs: 2 * DAY_MS, steady: false });
    expect(early.lostWorkers.lost).toEqual([]);
    expect(early.orphanConsumers.deleted).toEqual([]);
    expect(w.ctx.loop.projection.workers.get('w3')?.snapshot.value).toBe('Active');

    // Two days on (the clock shifted): the consumers were created and gpu last seen then.
    const report = await sweepNow(w, { shiftMs: 2 * DAY_MS });
    expect(report.failed).toEqual([]);
    expect(report.lostWorkers.lost).toEqual(['w3']);
    expect(w.ctx.loop.projection.workers.get('w3')?.snapshot.value).toBe('Lost');
    expect(w.ctx.loop.projection.workers.get('w2')?.snapshot.value).toBe('Active');
    expect(report.orphanConsumers.checked).toBe(3);
    expect(report.orphanConsumers.deleted.sort()).toEqual(['dispatch_arm', 'dispatch_gpu']);
    const left = [];
    for await (const ci of nats.jsm.consumers.list(n.streams.dispatch)) left.push(ci.name);
    expect(left).toEqual(['dispatch_linux']);
    // The sweep dropped what the cache knew of gpu: the next ensure recreates the consumer
    // rather than trusting that it exists.
    await w.ctx.dispatchConsumers.ensure('gpu');
    await expect(nats.jsm.consumers.info(n.streams.dispatch, 'dispatch_gpu')).resolves.toBeTruthy();
    // Now, not two days on: nothing is a day old yet.
    expect((await sweepNow(w)).orphanConsumers.deleted).toEqual([]);
  });

  it('trusts a dispatch consumer it made sure of only for the recheck time', async () => {
    const w = await world();
    const n = w.ctx.names;
    let clock = 0;
    const consumers = new DispatchConsumers(nats.jsm, n, () => clock, DISPATCH_CONSUMER_RECHECK_MS);
    const exists = () =>
      nats.jsm.consumers.info(n.streams.dispatch, 'dispatch_solo').then(
        () => true,
        () => false,
      );
    await consumers.ensure('solo');
    // Deleted by another process (a sweep elsewhere, an operator): not noticed at once...
    await nats.jsm.consumers.delete(n.streams.dispatch, 'dispatch_solo');
    clock = DISPATCH_CONSUMER_RECHECK_MS - 1;
    await consumers.ensure('solo');
    expect(await exists()).toBe(false);
    // ...but once the entry is older than the recheck time, and at once when forced (join).
    clock = DISPATCH_CONSUMER_RECHECK_MS;
    await consumers.ensure('solo');
    expect(await exists()).toBe(true);
    await nats.jsm.consumers.delete(n.streams.dispatch, 'dispatch_solo');
    await consumers.ensure('solo', { force: true });
    expect(await exists()).toBe(true);
  });

  it('purges the events, result, output and error history of a run finished past retention, then evicts it with RunExpired; a restart from the snapshot agrees', async () => {
    const w = await world();
    const n = w.ctx.names;
    const outputs = await ObjOutputStore.open(nats.nc, n);
    // 'old': one task finalized, its step and run succeeded; an output in the object store,
    // a result, an error history and a poison record from an earlier failure.
    const [job] = await seedFinalizing(w.ctx.writer, n, {
      runId: 'old',
      taskIds: ['t1'],
      stored: () => true,
      outputs,
    });
    const sink = await KvResultsSink.open(nats.nc, n);
    await sink.upsert(
      {
        runId: 'old',
        stepId: 's1',
        taskId: 't1',
        attemptId: 'a1',
        attempt: 1,
        startedAt: null,
        finishedAt: null,
        outputRef: job!.outputRef,
        bytes: 2,
        kind: 'json',
        finalizedAt: new Date().toISOString(),
      },
      bodyOf(new TextEncoder().encode('{}')),
    );
    const failures = await FailureLog.open(nats.nc, n);
    await failures.record(job!, {
      error: 'slow sink',
      at: new Date().toISOString(),
      delivery: 1,
      round: 0,
      permanent: false,
      by: 'test',
    });
    await jetstream(nats.nc).publish(n.subjects.poison('old', 't1'), '{}');
    await w.write(n.subjects.task('old', 't1'), 'TaskFinalized', {
      attemptId: 'a1',
      resultKey: 'old.t1',
    });
    await w.write(n.subjects.step('old', 's1'), 'StepSucceeded', {});
    await w.write(n.subjects.run('old'), 'RunSucceeded', {});
    // 'live': still running; never purged whatever its age.
    await pendingTasks(w, 'live', ['t1']);
    expect(await outputs.get(job!.outputRef)).not.toBeNull();

    // Inside retention: nothing to do.
    expect((await sweepNow(w)).retention).toMatchObject({ expired: 0, purged: [], evicted: [] });
    const lastOfOld = Math.max(
      ...[
        w.ctx.loop.projection.runs.get('old')!,
        w.ctx.loop.projection.steps.get('old.s1')!,
        w.ctx.loop.projection.tasks.get('old.t1')!,
      ].map((a) => a.seq),
    );
    // 31 days on (past the default 30d):
    const report = await sweepNow(w, { shiftMs: 31 * DAY_MS });
    expect(report.failed).toEqual([]);
    expect(report.retention).toMatchObject({
      expired: 1,
      purged: ['old'],
      evicted: ['old'],
      open: 0,
      skipped: null,
    });
    expect(report.retention.snapshotSeq).toBeGreaterThanOrEqual(lastOfOld);

    for (const subject of [n.subjects.step('old', 's1'), n.subjects.task('old', 't1')]) {
      expect(await w.ctx.store.lastSeqOf(subject)).toBe(0);
    }
    // The run subject holds only the RunExpired appended after its purge.
    const runEvents = await w.ctx.store.readAggregate(n.subjects.run('old'));
    expect(runEvents.map((r) => r.type)).toEqual(['RunExpired']);
    expect(runEvents[0]!.seq).toBeGreaterThan(report.retention.snapshotSeq!);
    expect(await w.ctx.store.lastSeqOf(n.subjects.run('live'))).toBeGreaterThan(0);
    expect(await sink.get('old', 't1')).toBeNull();
    expect(await failures.history('old', 't1', 'a1')).toEqual([]);
    expect(await outputs.get(job!.outputRef)).toBeNull();
    expect(await subjectsIn(n.streams.poison, n.subjects.poisonAll)).toEqual([]);
    // The live projection keeps only the run's summary.
    const live = w.ctx.loop.projection;
    expect(live.runs.has('old')).toBe(false);
    expect(live.tasks.has('old.t1')).toBe(false);
    expect(live.expiredRuns.get('old')).toMatchObject({
      state: 'Succeeded',
      tasks: { Succeeded: 1 },
    });

    // A backend starting now loads the snapshot: the purged run is there, finished, and the
    // RunExpired after it evicts it.
    const loaded = await loadSnapshot({ nc: nats.nc, jsm: nats.jsm, names: n, log: silentLogger });
    expect(loaded).not.toBeNull();
    const p = loaded!.projection;
    expect(p.runs.get('old')?.snapshot.value).toBe('Succeeded');
    expect(p.tasks.get('old.t1')?.snapshot.value).toBe('Succeeded');
    expect(p.runs.get('live')?.snapshot.value).toBe('Running');
    await w.ctx.store.replay((r) => void applyEvent(p, r), { fromSeq: loaded!.header.seq + 1 });
    expect(p.runs.has('old')).toBe(false);
    expect(p.expiredRuns.get('old')).toEqual(live.expiredRuns.get('old'));
    // Expired once: later sweeps neither purge nor count it again.
    expect((await sweepNow(w, { shiftMs: 31 * DAY_MS })).retention).toMatchObject({
      expired: 0,
      purged: [],
      evicted: [],
    });
  });

  it('two backends race for the turn: exactly one sweeps', async () => {
    const sweepers: Sweeper[] = [];
    const component = (ctx: BackendContext) => {
      const s = new Sweeper(ctx, { checkEvery: 50 });
      sweepers.push(s);
      return s;
    };
    const prefix = freshPrefix();
    // Started together: their first checks come within a few ms of each other.
    const [a] = await Promise.all(
      ['node-a', 'node-b'].map((nodeId) => world({ components: [component], nodeId, prefix })),
    );
    // Both check every 50 ms; the turn (SONAR_FULL_SWEEP 1h) is due once.
    await eventually(() => sweepers.every((s) => s.stats.notDue >= 5), { timeoutMs: 15_000 });
    const swept = sweepers.map((s) => s.stats.swept);
    expect(swept.reduce((x, y) => x + y)).toBe(1);
    const winner = sweepers.find((s) => s.stats.swept === 1)!;
    await eventually(() => winner.lastReport !== null);
    const kv = await new Kvm(nats.nc).open(a!.ctx.names.buckets.schedule);
    const turn = (await kv.get(FULL_SWEEP_KEY))!.json<{ by: string; lastAt: string }>();
    expect(turn.by).toBe(winner.lastReport!.by);
  });

  it('of claims racing on one due turn, exactly one lands', async () => {
    const w = await world();
    const kv = await new Kvm(nats.nc).open(w.ctx.names.buckets.schedule);
    const old = JSON.stringify({ lastAt: new Date(0).toISOString(), by: 'long-gone' });
    for (let round = 0; round < 5; round++) {
      // First round: no turn was ever taken (create); then an old one (update).
      if (round > 0) await kv.put(FULL_SWEEP_KEY, old);
      const claims = await Promise.all(
        ['a', 'b', 'c', 'd'].map((nodeId) =>
          claimSweepTurn(kv, { nodeId, now: Date.now(), intervalMs: 3_600_000 }),
        ),
      );
      expect(claims.filter((c) => c.won)).toHaveLength(1);
    }
  });

  it('`sonar sweep --json` has a backend run one pass, without claiming the turn, and shows its progress', async () => {
    const w = await world({ handlers: apiHandlers, nodeId: 'sweeping-backend' });
    const n = w.ctx.names;
    await jetstream(nats.nc).publish(n.subjects.dispatch('linux'), 'not json');
    const out = await runCli([
      'sweep',
      '--json',
      '--server',
      nats.server.url,
      '--prefix',
      n.prefix,
    ]);
    expect(out.code, out.stderr).toBe(0);
    const report = JSON.parse(out.stdout) as SweepReport;
    expect(report.staleDispatch).toEqual({ checked: 1, purged: 1 });
    expect(report.failed).toEqual([]);
    expect(report.by).toBe('sweeping-backend');
    // Each repair as it began, in order, on stderr.
    expect(out.stderr).toContain('sweep: registry (1 of 7)\n');
    expect(out.stderr).toContain('sweep: retention (7 of 7)\n');
    const kv = await new Kvm(nats.nc).open(n.buckets.schedule);
    expect(await kv.get(FULL_SWEEP_KEY)).toBeNull();
  });
});

describe('`sonar sweep` with no backend to run it', () => {
  it('fails at once with one line', async () => {
    const out = await runCli(['sweep', '--server', nats.server.url, '--prefix', freshPrefix()]);
    expect(out.code).toBe(1);
    expect(out.stderr.trim()).toMatch(/^sonar: sweep: no backend is serving it$/);
  });
});

/** `node bin/sonar.js ...`: exit code and stdout. */
async function runCli(
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['bin/sonar.js', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
