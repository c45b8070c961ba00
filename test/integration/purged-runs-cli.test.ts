/**
 * The read-only verbs once retention purged events (docs/operations.md, "Snapshots once
 * events are purged"): a run purged but not yet expired lives only in the projection
 * snapshot, so `sonar status` loads the snapshot as a backend's start does, `sonar rerun`
 * falls back to it, and `sonar export` says what it cannot export. `rerun` of a run still
 * whole reads that run's events only.
 */
import { Objm } from '@nats-io/obj';
import { describe, expect, it } from 'vitest';
import type { EventRecord } from '../../actors/projection.js';
import { replayRecords } from '../../actors/replay.js';
import { SNAPSHOT_OBJECT } from '../../src/backend/snapshots/snapshot.js';
import { readRun } from '../../src/cli/read-run.js';
import { rerunFile } from '../../src/cli/rerun-file.js';
import type { StatusView } from '../../src/cli/status-view.js';
import { finishedRun } from '../helpers/finished-run.js';
import { snapshotNow } from '../helpers/snapshot-now.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { runSonar } from '../helpers/sonar-process.js';
import { sweepWorldsPerTest } from '../helpers/sweep-world.js';
import type { TestBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();
const world = sweepWorldsPerTest(nats);

const sonar = (w: TestBackend, ...args: string[]) =>
  runSonar(args[0]!, [...args, '--server', nats.server.url, '--prefix', w.ctx.names.prefix], {});

async function status(w: TestBackend, ...args: string[]): Promise<StatusView> {
  const out = await sonar(w, 'status', '--json', ...args);
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout) as StatusView;
}

/**
 * What a retention pass cut short between the purge and `RunExpired` leaves (retention.ts,
 * in that order): a snapshot holding the run, then its task, step and run subjects purged.
 */
async function purgeKeepingSnapshot(w: TestBackend, runId: string): Promise<void> {
  const n = w.ctx.names;
  const written = await snapshotNow(w);
  expect(written).not.toBeNull();
  for (const filter of [
    n.subjects.task(runId, '*'),
    n.subjects.step(runId, '*'),
    n.subjects.run(runId),
  ]) {
    await nats.jsm.streams.purge(n.streams.events, { filter });
  }
}

/**
 * The events of a 3-task run whose last task failed: its step, tasks and run created, 4 per
 * succeeded task, 3 for the failed one, then StepFailed and RunFailed.
 */
const HALF_EVENTS = 3 + 4 * 2 + 3 + 4;

describe('a run purged by retention, not yet expired', () => {
  it('still shows in status, one run and the overview, from the snapshot', async () => {
    const w = await world();
    await finishedRun(w, 'half', 3, { failed: 1 });
    await finishedRun(w, 'whole', 2);
    await purgeKeepingSnapshot(w, 'half');
    // Written after the snapshot: folded from the stream on top of it.
    await finishedRun(w, 'later', 1, { failed: 1 });

    const one = await status(w, '--run', 'half');
    expect(one.runs).toEqual({
      half: {
        state: 'Failed',
        tasks: { Succeeded: 2, Failed: 1 },
        steps: { s1: { state: 'Failed', starved: false, tasks: { Succeeded: 2, Failed: 1 } } },
      },
    });
    const all = await status(w, '--all');
    expect(Object.keys(all.runs).sort()).toEqual(['half', 'later', 'whole']);
    expect(all.runs['whole']).toMatchObject({ state: 'Succeeded', tasks: { Succeeded: 2 } });
    expect(all.runs['later']).toMatchObject({ state: 'Failed', tasks: { Failed: 1 } });

    // The text view too, with nothing said on stderr: the snapshot was usable.
    const text = await sonar(w, 'status', '--run', 'half');
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/half\s+Failed/);
    expect(text.stderr).not.toContain('sonar:');
  });

  it('with the snapshot gone, status says on stderr that purged runs are missing', async () => {
    const w = await world();
    await finishedRun(w, 'half', 2);
    await finishedRun(w, 'whole', 1);
    await purgeKeepingSnapshot(w, 'half');
    const os = await new Objm(nats.nc).open(w.ctx.names.objectStores.snapshots);
    await os.delete(SNAPSHOT_OBJECT);

    const out = await sonar(w, 'status', '--all', '--json');
    expect(out.code, out.stderr).toBe(0);
    expect(Object.keys((JSON.parse(out.stdout) as StatusView).runs)).toEqual(['whole']);
    expect(out.stderr).toContain(
      `sonar: warning: the projection snapshot is unusable (none stored) while ${2 + 4 * 2 + 2 + 2} events were purged`,
    );
    expect(out.stderr).toContain('runs purged but not yet expired are missing');
  });

  it('export says once on stderr how many events retention purged; stdout is the stream', async () => {
    const w = await world();
    await finishedRun(w, 'half', 3, { failed: 1 });
    await finishedRun(w, 'whole', 2);
    await purgeKeepingSnapshot(w, 'half');

    const out = await sonar(w, 'export');
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trim().split('\n');
    const stored = (await nats.jsm.streams.info(w.ctx.names.streams.events)).state.messages;
    expect(lines).toHaveLength(stored);
    expect(out.stdout).not.toContain('.half');
    const notes = out.stderr.split('\n').filter((l) => l.startsWith('sonar:'));
    expect(notes).toEqual([
      `sonar: note: ${HALF_EVENTS} events were purged from ${w.ctx.names.streams.events} by retention (SONAR_RETENTION) and are not in this export`,
    ]);
  });

  it('rerun takes its tasks from the snapshot, and submits', async () => {
    const w = await world({ handlers: undefined });
    await finishedRun(w, 'half', 3, { failed: 1 });
    await purgeKeepingSnapshot(w, 'half');

    const read = await readRun({ nc: nats.nc, names: w.ctx.names }, 'half');
    expect(read).toMatchObject({ eventsRead: 0, fromSnapshot: true });

    const dry = await sonar(w, 'rerun', 'half', '--failed', '--as', 'again', '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      runId: 'again',
      steps: [{ id: 's1', tags: ['linux'], after: [], tasks: [{ id: 't2', maxAttempts: 1 }] }],
    });
    const done = await sonar(w, 'rerun', 'half', '--failed', '--as', 'again');
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toBe('submitted run again: 1 task(s) of half that did not succeed\n');
    await w.ctx.loop.waitFor(await w.ctx.store.endSeq());
    expect(w.ctx.loop.projection.tasks.get('again.t2')?.snapshot.context.spec.command).toEqual([
      'false',
    ]);
  });
});

describe('rerun of a run still whole', () => {
  it("reads the run's own events only, and builds the file a whole fold would", async () => {
    const w = await world();
    const n = w.ctx.names;
    await finishedRun(w, 'before', 20);
    await finishedRun(w, 'target', 3, { failed: 1 });
    await finishedRun(w, 'after', 20);
    // Another run whose id starts the same: its subjects must not match the target's filters.
    await finishedRun(w, 'target2', 2, { failed: 1 });

    const read = await readRun({ nc: nats.nc, names: n }, 'target');
    expect(read.fromSnapshot).toBe(false);
    expect(read.eventsRead).toBe(HALF_EVENTS);
    expect([...read.projection.runs.keys()]).toEqual(['target']);

    const all: EventRecord[] = [];
    await w.ctx.store.replay((r) => void all.push(r));
    expect(all.length).toBeGreaterThan(10 * HALF_EVENTS);
    const whole = replayRecords(all).projection;
    expect(rerunFile(read.projection, 'target', 'again')).toEqual(
      rerunFile(whole, 'target', 'again'),
    );
  });
});
