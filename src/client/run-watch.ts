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
 * run's status, and each progress its tasks report; ends after the update in which the run
 * ends. Reads only the run's own
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
  let pending: EventRecord[] = [];
  let wake: (() => void) | null = null;
  const poke = () => {
    wake?.();
    wake = null;
  };
  // The latest progress of each task not yet handed out. One of an attempt the events have
  // not reached yet waits for them; one of an earlier attempt is stale and dropped.
  const reported = new Map<string, TaskProgress>();
  let progressArrived = false;
  const attemptOf = (taskId: string): number =>
    p.tasks.get(`${runId}.${taskId}`)?.snapshot.context.attempt ?? 0;
  const takeProgress = (): TaskProgress[] => {
    progressArrived = false;
    const out: TaskProgress[] = [];
    for (const [taskId, r] of reported) {
      const attempt = attemptOf(taskId);
      if (r.attempt > attempt) continue;
      reported.delete(taskId);
      if (r.attempt === attempt) out.push(r);
    }
    return out;
  };
  const fold = (events: EventRecord[]): RunUpdate => {
    events.sort(bySeq);
    for (const r of events) applyEvent(p, r);
    return { status: runStatusOf(p, runId), events, progress: takeProgress() };
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

  let stopped = false;
  const closers: (() => Promise<void>)[] = [];
  // Progress is watched from before the first read (its latest values first), so none stored
  // while the events are read is missed.
  if (progressStore !== null) {
    const ac = new AbortController();
    closers.push(() => Promise.resolve(ac.abort()));
    void (async () => {
      for await (const r of progressStore.watch(runId, ac.signal)) {
        reported.set(r.taskId, r);
        progressArrived = true;
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
    signal?.throwIfAborted();
    const first = fold(await catchUp());
    yield first;
    if (isRunEnded(first.status)) return;
    for (const f of filters) await follow(f);
    for (;;) {
      // Checked before each wait too: an abort before the listener was added fires nothing.
      signal?.throwIfAborted();
      if (pending.length === 0 && !progressArrived) {
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
      // Progress that waits for its attempt's events makes no update on its own.
      if (update.events.length > 0 || update.progress.length > 0) yield update;
    }
  } finally {
    stopped = true;
    signal?.removeEventListener('abort', poke);
    await Promise.all(closers.map((c) => c().catch(() => undefined)));
  }
}
