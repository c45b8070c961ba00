/**
 * Retention bounds the projection (docs/operations.md, "Full sweep, retention and bounded shutdown"): a
 * run finished more than SONAR_RETENTION ago is purged, then evicted with `RunExpired`, and a
 * worker ended that long ago with `WorkerExpired`. What is left of the run is its summary,
 * and every way of folding the stream agrees: the live projection, a fresh replay of what
 * the stream still holds, a restart from the snapshot.
 */
import { describe, expect, it } from 'vitest';
import { replayRecords } from '../../actors/replay.js';
import type { EventRecord, Projection } from '../../actors/projection.js';
import { loadSnapshot } from '../../src/backend/snapshots/snapshot.js';
import type { StatusView } from '../../src/cli/status-view.js';
import { workerHandlers } from '../../src/backend/api/handlers/worker-handlers.js';
import { silentLogger } from '../../src/log.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { snapshotNow } from '../helpers/snapshot-now.js';
import { finishedRun } from '../helpers/finished-run.js';
import { dumpProjection } from '../helpers/projection-dump.js';
import { pulse, workersBucket } from '../helpers/reconciler-backend.js';
import { runSonar } from '../helpers/sonar-process.js';
import { DAY_MS, sweepNow, sweepWorldsPerTest } from '../helpers/sweep-world.js';
import type { TestBackend } from '../helpers/test-backend.js';

/**
 * A projection's dump without its publish times. Retention purges the `TaskPublished` events
 * of the runs it expires, so a fold of what the stream still holds lacks their times, while a
 * live projection (and a snapshot of it) keeps them until they age out: the two can differ
 * there only, by times of runs already expired, which only make a tag's rate bucket stricter.
 */
const dumpFolded = (p: Parameters<typeof dumpProjection>[0]) => {
  const { publishTimes: _publishTimes, ...rest } = dumpProjection(p);
  return rest;
};

const nats = serverPerFile();

const sweepWorld = sweepWorldsPerTest(nats);
const world = (prefix?: string): Promise<TestBackend> => sweepWorld({ prefix });

/** Every event the stream holds now, folded afresh (what `sonar status` and replay do). */
async function freshReplay(w: TestBackend): Promise<Projection> {
  const records: EventRecord[] = [];
  await w.ctx.store.replay((r) => void records.push(r));
  return replayRecords(records).projection;
}

async function status(w: TestBackend, args: string[]): Promise<StatusView> {
  const out = await runSonar(
    'status',
    ['status', '--json', '--server', nats.server.url, '--prefix', w.ctx.names.prefix, ...args],
    {},
  );
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout) as StatusView;
}

describe('retention evicts what it purged', () => {
  it('a run finished past retention keeps only its summary, everywhere alike', async () => {
    const w = await world();
    const n = w.ctx.names;
    await w.write(n.subjects.worker('w1'), 'WorkerJoined', {
      workerId: 'w1',
      host: 'h1',
      tags: ['linux'],
      slots: 2,
    });
    await w.write(n.subjects.worker('w2'), 'WorkerJoined', {
      workerId: 'w2',
      host: 'h2',
      tags: ['linux'],
      slots: 2,
    });
    // w2 stays in service: its registry key is there, so the sweep does not declare it Lost.
    await pulse(await workersBucket(nats.nc, n.prefix), 'w2');
    await finishedRun(w, 'old', 3);
    await w.write(n.subjects.worker('w1'), 'WorkerLeft', {});
    // Still running: never evicted, whatever its age.
    await w.write(n.subjects.step('live', 's1'), 'StepCreated', {
      runId: 'live',
      stepId: 's1',
      tags: ['linux'],
      after: [],
      taskCount: 1,
    });
    await w.write(n.subjects.task('live', 't0'), 'TaskCreated', {
      runId: 'live',
      stepId: 's1',
      taskId: 't0',
      tags: ['linux'],
    });
    await w.write(n.subjects.run('live'), 'RunSubmitted', {
      runId: 'live',
      stepIds: ['s1'],
      taskCount: 1,
    });
    const live = w.ctx.loop.projection;
    const summaryBefore = { ...live.runs.get('old')!.snapshot.context };

    // Inside retention nothing goes.
    const early = await sweepNow(w, { shiftMs: 29 * DAY_MS });
    expect(early.retention).toMatchObject({ purged: [], evicted: [], workersEvicted: [] });
    expect(live.tasks.has('old.t0')).toBe(true);

    const report = await sweepNow(w, { shiftMs: 31 * DAY_MS });
    expect(report.failed).toEqual([]);
    expect(report.retention).toMatchObject({
      purged: ['old'],
      evicted: ['old'],
      workersEvicted: ['w1'],
    });

    // The live projection: the run's steps, tasks and inputs are gone, its summary stays.
    expect([...live.runs.keys()]).toEqual(['live']);
    expect([...live.tasks.keys()]).toEqual(['live.t0']);
    expect([...live.steps.keys()]).toEqual(['live.s1']);
    expect([...live.stepIndex.keys()]).toEqual(['live.s1']);
    expect(JSON.stringify([...live.tasks.values()])).not.toContain('xxxxxxxx');
    expect(live.expiredRuns.get('old')).toMatchObject({
      runId: 'old',
      state: 'Succeeded',
      reason: null,
      submittedAt: summaryBefore.submittedAt,
      endedAt: summaryBefore.endedAt,
      taskCount: 3,
      tasks: { Succeeded: 3 },
    });
    expect([...live.workers.keys()]).toEqual(['w2']);
    expect([...live.workersInService]).toEqual(['w2']);

    // `sonar status` (a fresh fold in another process) shows how it ended.
    const one = await status(w, ['--run', 'old']);
    expect(one.runs).toEqual({
      old: {
        state: 'Succeeded',
        tasks: { Succeeded: 3 },
        steps: {},
        expired: {
          submittedAt: summaryBefore.submittedAt,
          endedAt: summaryBefore.endedAt,
          reason: null,
          at: live.expiredRuns.get('old')!.expiredAt,
        },
      },
    });
    expect(Object.keys((await status(w, ['--all'])).runs)).toEqual(['live', 'old']);

    // A fresh replay of what the stream still holds agrees with the live projection.
    expect(dumpFolded(await freshReplay(w))).toStrictEqual(dumpFolded(live));

    // So does a restart from a snapshot written now.
    const written = await snapshotNow(w);
    expect(written).not.toBeNull();
    const loaded = await loadSnapshot({ nc: nats.nc, jsm: nats.jsm, names: n, log: silentLogger });
    expect(loaded!.header.counts).toEqual({
      tasks: 1,
      steps: 1,
      runs: 1,
      workers: 1,
      expiredRuns: 1,
      schedules: 0,
    });
    const restarted = await world(n.prefix);
    expect(dumpProjection(restarted.ctx.loop.projection)).toStrictEqual(dumpProjection(live));

    // An expired worker's id cannot join again: its subject still holds its events.
    const join = workerHandlers(restarted.ctx).join!;
    await expect(
      join({ workerId: 'w1', host: 'h1', tags: ['linux'], slots: 2 }, { progress: () => {} }),
    ).rejects.toMatchObject({ code: 'conflict', message: /worker w1 is Expired/ });
    // Nothing can be submitted under the expired id again.
    await expect(
      restarted.write(n.subjects.run('old'), 'RunSubmitted', {
        runId: 'old',
        stepIds: ['s1'],
        taskCount: 1,
      }),
    ).rejects.toThrow(/RunSubmitted is not accepted in state "Expired"/);
  });

  it('a crash between the purge and RunExpired: the next sweep appends it, and replays converge', async () => {
    const w = await world();
    const n = w.ctx.names;
    await finishedRun(w, 'half', 2);
    const live = w.ctx.loop.projection;
    // What a pass cut short leaves: a snapshot holding the run, its subjects purged, no
    // RunExpired yet (retention.ts, in that order).
    await snapshotNow(w);
    for (const filter of [
      n.subjects.task('half', '*'),
      n.subjects.step('half', '*'),
      n.subjects.run('half'),
    ]) {
      await nats.jsm.streams.purge(n.streams.events, { filter });
    }
    expect(live.tasks.has('half.t0')).toBe(true);
    // Meanwhile a restart from the snapshot still holds the run whole.
    const before = await world(n.prefix);
    expect(before.ctx.loop.projection.tasks.has('half.t0')).toBe(true);

    const report = await sweepNow(w, { shiftMs: 31 * DAY_MS });
    expect(report.failed).toEqual([]);
    // Not purged again (its run subject is already empty), only evicted.
    expect(report.retention).toMatchObject({ expired: 0, purged: [], evicted: ['half'] });
    expect(live.tasks.size).toBe(0);
    expect(live.expiredRuns.get('half')).toMatchObject({ state: 'Succeeded', taskCount: 2 });

    // The backend restarted from the older snapshot folds the RunExpired too.
    await before.ctx.loop.waitFor(w.ctx.loop.position);
    expect(dumpProjection(before.ctx.loop.projection)).toStrictEqual(dumpProjection(live));
    // And a replay of the stream alone (the run's other events are gone) says the same:
    // RunExpired carries the summary.
    expect(dumpFolded(await freshReplay(w))).toStrictEqual(dumpFolded(live));
    // A second sweep finds nothing left to do.
    expect((await sweepNow(w, { shiftMs: 31 * DAY_MS })).retention).toMatchObject({
      expired: 0,
      purged: [],
      evicted: [],
    });
  });
});
