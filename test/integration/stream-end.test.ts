/**
 * Every replay ends, wherever the events stream's end is: after retention purged the newest
 * events (the stream's `last_seq` then names a deleted message), with holes inside, when it
 * is empty, and when a purge lands while it reads. At the event-store level, then with the
 * real CLI verbs and a real backend on a stream whose newest run was purged by `sonar sweep`.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Objm } from '@nats-io/obj';
import { nuid } from '@nats-io/transport-node';
import type { EventRecord } from '../../actors/projection.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventStore } from '../../streams/event-store.js';
import type { AppendItem } from '../../streams/event-store.js';
import type { Names } from '../../streams/names.js';
import { SNAPSHOT_OBJECT } from '../../src/backend/snapshots/snapshot.js';
import type { RunFile } from '../../src/protocol.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { spawnSonar } from '../helpers/sonar-process.js';
import { freshStore } from '../helpers/topology.js';
import {
  killWorkers,
  runFileOf,
  spawnWorker,
  startTestBackend,
  waitJoined,
} from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();

afterAll(async () => {
  await killWorkers();
});

/** Appends one event per subject, in order (fresh ids: no dedupe); returns their sequences. */
async function appendAll(store: EventStore, subjects: string[]): Promise<number[]> {
  const seqs: number[] = [];
  for (const subject of subjects) {
    seqs.push(
      (await store.append(subject, { id: nuid.next(), type: 'TaskCreated', data: {} })).seq,
    );
  }
  return seqs;
}

/** Every sequence a replay hands over, and what it returns. */
async function replayed(
  store: EventStore,
  opts: Parameters<EventStore['replay']>[1] = {},
): Promise<{ seqs: number[]; last: number }> {
  const seqs: number[] = [];
  const last = await store.replay((r) => void seqs.push(r.seq), opts);
  return { seqs, last };
}

/** The stream's state, and the sequence of the last event it still stores (0: none). */
async function streamEnd(n: Names): Promise<{ lastSeq: number; stored: number; num: number }> {
  const { state } = await nats.jsm.streams.info(n.streams.events);
  const m = await nats.jsm.streams.getMessage(n.streams.events, {
    last_by_subj: n.subjects.eventsAll,
  });
  return { lastSeq: state.last_seq, stored: m?.seq ?? 0, num: state.messages };
}

describe('EventStore.replay ends', () => {
  it('on an empty stream, and on one emptied by a purge', async () => {
    const { n, store } = await freshStore(nats.nc);
    expect(await replayed(store)).toEqual({ seqs: [], last: 0 });
    expect(await store.endSeq()).toBe(0);
    expect(await store.readAggregate(n.subjects.run('r1'))).toEqual([]);

    await appendAll(store, [n.subjects.run('r1'), n.subjects.run('r2')]);
    await nats.jsm.streams.purge(n.streams.events);
    expect((await streamEnd(n)).lastSeq).toBe(2);
    expect(await replayed(store)).toEqual({ seqs: [], last: 0 });
    expect(await replayed(store, { fromSeq: 2 })).toEqual({ seqs: [], last: 1 });
    expect(await replayed(store, { filter: n.subjects.task('r1', '*') })).toEqual({
      seqs: [],
      last: 0,
    });
  });

  it('with holes inside the stream, for the whole stream and for a wildcard filter', async () => {
    const { n, store } = await freshStore(nats.nc);
    const seqs = await appendAll(store, [
      n.subjects.worker('w1'),
      n.subjects.task('r1', 't1'),
      n.subjects.task('r1', 't2'),
      n.subjects.task('r2', 't1'),
      n.subjects.task('r1', 't3'),
      n.subjects.run('r1'),
    ]);
    await nats.jsm.streams.deleteMessage(n.streams.events, seqs[2]!);
    await nats.jsm.streams.purge(n.streams.events, { filter: n.subjects.task('r2', '*') });
    expect(await replayed(store)).toEqual({ seqs: [1, 2, 5, 6], last: 6 });
    expect(await replayed(store, { fromSeq: 3 })).toEqual({ seqs: [5, 6], last: 6 });
    expect(await replayed(store, { filter: n.subjects.task('r1', '*') })).toEqual({
      seqs: [2, 5],
      last: 5,
    });
    // The filter's last event is inside the stream; its holes come after it.
    expect(await replayed(store, { filter: n.subjects.task('r2', '*') })).toEqual({
      seqs: [],
      last: 0,
    });
  });

  it('after a purge of its newest events: at the last event stored, not at last_seq', async () => {
    const { n, store } = await freshStore(nats.nc);
    await appendAll(store, [
      n.subjects.worker('w1'),
      n.subjects.run('old'),
      n.subjects.task('old', 't1'),
      n.subjects.task('old', 't2'),
      n.subjects.step('old', 's1'),
      n.subjects.run('old'),
    ]);
    await nats.jsm.streams.purge(n.streams.events, { filter: n.subjects.task('old', '*') });
    await nats.jsm.streams.purge(n.streams.events, { filter: n.subjects.step('old', '*') });
    await nats.jsm.streams.purge(n.streams.events, { filter: n.subjects.run('old') });
    // The shape the user reported: last_seq names a purged event.
    expect(await streamEnd(n)).toEqual({ lastSeq: 6, stored: 1, num: 1 });
    expect(await store.endSeq()).toBe(1);
    expect(await store.endSeq(6)).toBe(6); // a reader at last_seq needs no lookup
    expect(await replayed(store)).toEqual({ seqs: [1], last: 1 });
    expect(await replayed(store, { fromSeq: 2 })).toEqual({ seqs: [], last: 1 });
    expect(await replayed(store, { fromSeq: 7 })).toEqual({ seqs: [], last: 6 });

    // A later append is the end again; the store's remembered look does not hide it.
    const [seven] = await appendAll(store, [n.subjects.run('new')]);
    expect(seven).toBe(7);
    expect(await store.endSeq()).toBe(7);
    expect(await replayed(store)).toEqual({ seqs: [1, 7], last: 7 });
    // Purged again (a new hole after the remembered one): looked up again.
    await nats.jsm.streams.purge(n.streams.events, { filter: n.subjects.run('new') });
    expect(await store.endSeq()).toBe(1);
  });

  it('when a purge lands while it reads, with every event still stored read once, in order', async () => {
    const { n, store } = await freshStore(nats.nc);
    // More than one pull batch (32,768): the events after it are not delivered yet when the
    // purge lands, and on 2.9 the purge moves the replay's consumer past all of them.
    const total = 40_000;
    const items: AppendItem[] = Array.from({ length: total }, (_, i) => ({
      subject: i === total - 1 ? n.subjects.run('tail') : n.subjects.task('big', `t${i % 500}`),
      event: { id: `e${i}`, type: 'TaskCreated', data: {} },
    }));
    const acks = await store.appendMany(items);
    expect(acks.every((a) => a.status === 'fulfilled')).toBe(true);

    const seqs: number[] = [];
    let purged = false;
    const last = await store.replay(async (r) => {
      seqs.push(r.seq);
      if (purged) return;
      purged = true;
      // One subject from the middle of the stream, and the newest event: the end goes too.
      await nats.jsm.streams.purge(n.streams.events, { filter: n.subjects.task('big', 't7') });
      await nats.jsm.streams.purge(n.streams.events, { filter: n.subjects.run('tail') });
    });
    const stored = new Set<number>();
    for (let s = 1; s < total; s++) if (s % 500 !== 8) stored.add(s); // t7 holds seq 8, 508, ...
    expect(last).toBe(total - 1);
    expect(seqs.every((s, i) => i === 0 || s > seqs[i - 1]!)).toBe(true);
    expect(seqs.filter((s) => stored.has(s))).toHaveLength(stored.size);
  });
});

describe('after retention purged the newest events', () => {
  let tb: TestBackend;
  let dir: string;

  beforeAll(async () => {
    // The user's case: a short retention, one finished run, then the verbs.
    tb = await startTestBackend(
      nats.server.url,
      nats.nc,
      { SONAR_RETENTION: '1s' },
      { reconciler: true },
    );
    dir = await mkdtemp(join(tmpdir(), 'sonar-stream-end-'));
    spawnWorker(tb.env, ['--worker-id', 'w1', '--tags', 'a', '--slots', '4']);
    await waitJoined(tb.ctx, 'w1');
  });
  afterAll(async () => {
    await tb?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** `sonar <args>` against the test backend, killed (and failed) if it has not ended in time. */
  async function sonar(
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number | null; out: string; err: string }> {
    const p = spawnSonar(args[0]!, args, { ...tb.env, NO_COLOR: '1', ...env });
    const timer = setTimeout(() => void p.kill('SIGKILL'), 60_000);
    const { code } = await p.exited;
    clearTimeout(timer);
    if (p.killedOnPurpose) throw new Error(`sonar ${args.join(' ')} did not end in 60 s`);
    return { code, out: p.stdout(), err: p.stderr() };
  }

  async function runFile(file: RunFile): Promise<string> {
    const path = join(dir, `${file.runId}.json`);
    await writeFile(path, JSON.stringify(file));
    return path;
  }

  const twenty = (runId: string): RunFile =>
    runFileOf(runId, [{ id: 's1', tags: ['a'], count: 20, command: ['echo', 'hi'] }]);

  /**
   * `sonar sweep` until `runId` (finished more than the 1 s retention ago) is purged and
   * expired (the backend's own sweep may get there first), then its `RunExpired` deleted too:
   * the stream's newest events are then all removed, as after a crash between the purge and
   * the `RunExpired` append, or an older backend's retention purging the run subject again.
   */
  async function purgeRun(runId: string): Promise<void> {
    const subject = tb.ctx.names.subjects.run(runId);
    let left: EventRecord[] = [];
    await eventually(
      async () => {
        const r = await sonar(['sweep', '--json']);
        expect(r.code, r.err).toBe(0);
        left = await tb.ctx.store.readAggregate(subject);
        return left.every((e) => e.type === 'RunExpired');
      },
      { timeoutMs: 60_000, intervalMs: 200, message: `run ${runId} purged` },
    );
    const jsm = await tb.ctx.store.jsm();
    for (const e of left) await jsm.streams.deleteMessage(tb.ctx.names.streams.events, e.seq);
    // Its events were the newest: the stream's last sequence now names a removed event.
    const end = await streamEnd(tb.ctx.names);
    expect(end.stored).toBeGreaterThan(0);
    expect(end.lastSeq).toBeGreaterThan(end.stored);
  }

  it('`sonar status`, `sonar export`, `sonar tail --since` and `sonar submit --wait` of a new run finish', async () => {
    const old = await sonar(['submit', await runFile(twenty('old')), '--wait']);
    expect(old.code, old.err).toBe(0);
    await purgeRun('old');

    const status = await sonar(['status', '--all', '--json']);
    expect(status.code, status.err).toBe(0);
    const view = JSON.parse(status.out) as { workers: { workerId: string }[]; runs: object };
    expect(view.workers.map((w) => w.workerId)).toEqual(['w1']);

    const exported = await sonar(['export']);
    expect(exported.code, exported.err).toBe(0);
    const lines = exported.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { seq: number; subject: string });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.subject.includes('.old'))).toBe(false);
    expect(lines.at(-1)!.seq).toBe((await streamEnd(tb.ctx.names)).stored);

    // tail follows live: it has no end, but its start from the past must not wait for one.
    const tail = spawnSonar('tail', ['tail', '--since', '1h', '--json'], tb.env);
    // The backend's request path too: submit syncs with the stream's end first.
    const fresh = await sonar(['submit', await runFile(twenty('new')), '--wait']);
    expect(fresh.code, fresh.err).toBe(0);
    expect(fresh.out).toMatch(/run new Succeeded\n$/);
    await eventually(
      () => tail.stdout().includes('"subject":"' + tb.ctx.names.subjects.run('new')),
      {
        timeoutMs: 10_000,
        message: 'tail printed the new run',
      },
    );
    await tail.kill('SIGTERM');
  }, 180_000);

  it('a backend started without its snapshot (and the newest events purged) starts and serves', async () => {
    await purgeRun('new');
    await tb.stop();
    // Removed after the stop: a stopping backend may write one more.
    const os = await new Objm(nats.nc).open(tb.ctx.names.objectStores.snapshots);
    await os.delete(SNAPSHOT_OBJECT);
    const before = await streamEnd(tb.ctx.names);
    // Without the snapshot the purged runs are lost: the operator says so explicitly.
    tb = await startTestBackend(
      nats.server.url,
      nats.nc,
      { ...tb.env, SONAR_ALLOW_SNAPSHOT_LOSS: '1' },
      { reconciler: true },
    );
    expect(tb.ctx.loop.position).toBeGreaterThanOrEqual(before.stored);
    expect(tb.ctx.loop.projection.workers.get('w1')?.snapshot.value).toBe('Active');
    const after = await sonar(['submit', await runFile(twenty('after')), '--wait']);
    expect(after.code, after.err).toBe(0);
    expect(after.out).toMatch(/run after Succeeded\n$/);
  }, 180_000);
});
