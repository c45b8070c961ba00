import { applyEvent, createProjection } from '../../actors/projection.js';
import type { EventRecord } from '../../actors/projection.js';
import type { EventStore } from '../../streams/event-store.js';
import type { ProgressStore, TaskProgress } from '../storage/task-progress.js';
import type { Names } from '../../streams/names.js';
import { isRunEnded, runStatusOf } from './run-status.js';
import type { RunStatus } from './run-status.js';

/** One step of a run as `watch` sees it. */
export interface RunUpdate {
  /** The run after the events below. */
  status: RunStatus;
  /** The run's events this update folds in, in log order (the first update: all so far). */
  events: EventRecord[];
  /**
   * Progress its tasks reported since the last update (the first update: the latest of
   * each task), of their current attempts only.
   */
  progress: TaskProgress[];
}

/** A follower that stopped on its own (a consumer given up) is started again after this. */
const REFOLLOW_MS = 1_000;

const bySeq = (a: EventRecord, b: EventRecord): number => a.seq - b.seq;

/**
 * Follows one run: its events so far, then each new batch as it is appended, folded into the
 * run's status; ends after the update in which the run ends. Reads only the run's own
 * subjects (one ordered consumer each: 2.9 takes one filter per consumer), never the whole
 * log, and holds nothing open once it returns or is aborted.
 */
export async function* watchRun(
  store: EventStore,
  n: Names,
  runId: string,
  signal?: AbortSignal,
  progressStore: ProgressStore | null = null,
): AsyncGenerator<RunUpdate, void, undefined> {
  const p = createProjection();
  const filters = n.subjects.runAll(runId);
  const read = new Map(filters.map((f) => [f, 0]));
  let reported: TaskProgress[] = [];
  const current = (r: TaskProgress): boolean =>
    p.tasks.get(`${runId}.${r.taskId}`)?.snapshot.context.attempt === r.attempt;
  const fold = (events: EventRecord[]): RunUpdate => {
    events.sort(bySeq);
    for (const r of events) applyEvent(p, r);
    const progress = reported.filter(current);
    reported = [];
    return { status: runStatusOf(p, runId), events, progress };
  };
  // Everything each filter holds past what was read: the start, and the end once the run
  // ended, when another filter's follower may not have delivered its last events yet.
  const catchUp = async (): Promise<EventRecord[]> => {
    const batch: EventRecord[] = [];
    for (const f of filters) {
      read.set(
        f,
        await store.replay((r) => void batch.push(r), { filter: f, fromSeq: read.get(f)! + 1 }),
      );
    }
    return batch;
  };

  signal?.throwIfAborted();
  if (progressStore !== null) reported = [...(await progressStore.ofRun(runId)).values()];
  const first = fold(await catchUp());
  yield first;
  if (isRunEnded(first.status)) return;

  let pending: EventRecord[] = [];
  let wake: (() => void) | null = null;
  const poke = () => {
    wake?.();
    wake = null;
  };
  let stopped = false;
  const closers: (() => Promise<void>)[] = [];
  if (progressStore !== null) {
    const ac = new AbortController();
    closers.push(() => Promise.resolve(ac.abort()));
    void (async () => {
      for await (const r of progressStore.watch(runId, ac.signal, { updatesOnly: true })) {
        reported.push(r);
        poke();
      }
    })().catch(() => undefined);
  }
  const follow = async (f: string): Promise<void> => {
    const { close, closed } = await store.followEach(
      (r) => {
        if (r.seq <= read.get(f)!) return;
        read.set(f, r.seq);
        pending.push(r);
        poke();
      },
      { filter: f, fromSeq: read.get(f)! + 1 },
    );
    if (stopped) return close();
    closers.push(close);
    void closed.then(() => {
      if (!stopped) setTimeout(() => void follow(f).catch(() => undefined), REFOLLOW_MS).unref();
    });
  };
  signal?.addEventListener('abort', poke, { once: true });
  try {
    for (const f of filters) await follow(f);
    for (;;) {
      // Checked before each wait too: an abort before the listener was added fires nothing.
      signal?.throwIfAborted();
      if (pending.length === 0 && reported.length === 0) {
        await new Promise<void>((resolve) => (wake = resolve));
      }
      signal?.throwIfAborted();
      const batch = pending;
      pending = [];
      const update = fold(batch);
      if (isRunEnded(update.status)) {
        stopped = true;
        await Promise.all(closers.map((c) => c()));
        const rest = await catchUp();
        const last = rest.length > 0 ? fold(rest) : null;
        yield last
          ? {
              status: last.status,
              events: [...update.events, ...last.events],
              progress: [...update.progress, ...last.progress],
            }
          : update;
        return;
      }
      yield update;
    }
  } finally {
    stopped = true;
    signal?.removeEventListener('abort', poke);
    await Promise.all(closers.map((c) => c().catch(() => undefined)));
  }
}
