import { ErrorCode, IllegalTransitionError, SonarError } from '../../../actors/errors.js';
import type { Projection } from '../../../actors/projection.js';
import type { RunExpired } from '../../../actors/retention/retention.events.js';
import type { TaskState } from '../../../actors/task/task.machine.js';
import type { BackendContext } from '../context.js';
import { TASK_STATES } from '../storage/index.js';

/**
 * The projection snapshot store (`sonar_snapshots`, DESIGN.md section 2) as retention needs it.
 * Purging a run's events is safe only once a stored snapshot holds the run's final state:
 * afterwards a replay can rebuild that state from the snapshot alone.
 */
export interface RetentionSnapshots {
  /**
   * Makes sure the stored snapshot holds the projection at least up to stream sequence `seq`,
   * taking one now when the stored one is older; resolves to the sequence it holds.
   */
  ensureCovers(seq: number): Promise<number>;
}

/** What retention found and did. */
export interface RetentionReport {
  /** Runs finished more than SONAR_RETENTION ago whose data is still stored. */
  expired: number;
  /** Runs purged by this pass. */
  purged: string[];
  /**
   * Runs this pass evicted from every projection with `RunExpired` (only their summary is
   * kept): those it purged, and any an earlier pass purged but was cut short before.
   */
  evicted: string[];
  /** Workers Left or Lost more than SONAR_RETENTION ago, evicted with `WorkerExpired`. */
  workersEvicted: string[];
  /** Expired runs left alone because a task of theirs is still open (a Poisoned one). */
  open: number;
  /** Why nothing was purged although runs expired (no snapshot store to keep their state). */
  skipped: 'no-snapshots' | null;
  /** The snapshot sequence the purge relied on. */
  snapshotSeq: number | null;
}

/** The runs past retention: finished more than `retentionMs` before `now`, no task open. */
export function expiredRuns(
  p: Projection,
  now: number,
  retentionMs: number,
): { expired: string[]; open: number } {
  const expired: string[] = [];
  let open = 0;
  for (const [runId, { snapshot }] of p.runs) {
    const { endedAt, stepIds } = snapshot.context;
    if (snapshot.status !== 'done' || endedAt === null) continue;
    if (!(now - Date.parse(endedAt) > retentionMs)) continue;
    // A failed run may still hold a Poisoned task an operator can retry: keep it whole.
    if (stepIds.some((s) => p.activeSteps.has(`${runId}.${s}`))) open++;
    else expired.push(runId);
  }
  return { expired, open };
}

/** The stream sequence of the run's last event: the snapshot must hold at least this. */
function lastSeqOfRun(p: Projection, runId: string): number {
  const run = p.runs.get(runId);
  let seq = run?.seq ?? 0;
  for (const stepId of run?.snapshot.context.stepIds ?? []) {
    const key = `${runId}.${stepId}`;
    seq = Math.max(seq, p.steps.get(key)?.seq ?? 0);
    for (const t of p.stepTasks.get(key) ?? []) seq = Math.max(seq, p.tasks.get(t)?.seq ?? 0);
  }
  return seq;
}

/**
 * Applies SONAR_RETENTION (DESIGN.md section 9): the events, results, outputs and error
 * histories (finalize errors and poison records) of runs finished more than the retention
 * ago are purged by subject, then `RunExpired` (the run's summary) is appended onto its
 * emptied run subject, and every projection (live, replayed, restored from a snapshot)
 * forgets the run's steps, tasks and inputs. Workers Left or Lost more than the retention ago
 * are forgotten with `WorkerExpired`. Without a snapshot store nothing is purged.
 *
 * Order per run: a snapshot holding the run's final state is stored first; then outputs,
 * results, error histories, poison records, task and step events, the run's own subject
 * last; then `RunExpired`. A pass cut short anywhere is finished by the next one: a run
 * whose run subject is not yet empty is purged again (idempotent), and a run whose run
 * subject is empty but which a projection still holds (a crash between the purge and the
 * append) gets its `RunExpired` then. `RunExpired` is appended expecting an empty subject, so
 * it is stored once, and it outlives the purge it follows. Until it is appended, the purged
 * run lives on in the snapshot and in every projection, as before.
 */
export async function applyRetention(
  ctx: BackendContext,
  snapshots: RetentionSnapshots | null,
): Promise<RetentionReport> {
  const p = ctx.loop.projection;
  const found = expiredRuns(p, ctx.now(), ctx.config.retentionMs);
  const report: RetentionReport = {
    expired: 0,
    purged: [],
    evicted: [],
    workersEvicted: [],
    open: found.open,
    skipped: null,
    snapshotSeq: null,
  };
  const todo: string[] = [];
  const purgedBefore: string[] = [];
  for (const runId of found.expired) {
    if ((await ctx.store.lastSeqOf(ctx.names.subjects.run(runId))) === 0) purgedBefore.push(runId);
    else todo.push(runId);
  }
  report.expired = todo.length;
  for (const runId of purgedBefore) {
    if (await expireRun(ctx, runId)) report.evicted.push(runId);
  }
  report.workersEvicted = await expireWorkers(ctx);
  if (todo.length === 0) return report;
  if (!snapshots) {
    report.skipped = 'no-snapshots';
    return report;
  }
  const needed = Math.max(...todo.map((r) => lastSeqOfRun(p, r)));
  report.snapshotSeq = await snapshots.ensureCovers(needed);
  if (report.snapshotSeq < needed) {
    throw new SonarError(
      ErrorCode.Unavailable,
      `snapshot holds seq ${report.snapshotSeq}, retention needs ${needed}`,
    );
  }
  for (const runId of todo) {
    // The results database first: while it cannot delete, the run waits for the next sweep
    // whole, and the runs after it are purged all the same (NATS retention never waits on
    // the database).
    try {
      await ctx.results.purgeRun?.(runId);
    } catch (err: unknown) {
      ctx.log.warn(
        'retention: the results sink could not delete a run; it is tried again next sweep',
        {
          runId,
          error: err instanceof Error ? err.message : String(err),
        },
      );
      continue;
    }
    await purgeRun(ctx, runId);
    report.purged.push(runId);
    if (await expireRun(ctx, runId)) report.evicted.push(runId);
  }
  return report;
}

/** The `RunExpired` data of a finished run: how it ended, its tasks by final state. */
export function runExpiredData(p: Projection, runId: string): RunExpired['data'] {
  const run = p.runs.get(runId)!.snapshot;
  const c = run.context;
  const tasks: Partial<Record<TaskState, number>> = {};
  for (const stepId of c.stepIds) {
    const counts = p.stepIndex.get(`${runId}.${stepId}`)?.counts;
    if (!counts) continue;
    for (const s of TASK_STATES) if (counts[s] > 0) tasks[s] = (tasks[s] ?? 0) + counts[s];
  }
  return {
    runId,
    state: run.value as RunExpired['data']['state'],
    reason: c.reason,
    submittedAt: c.submittedAt,
    endedAt: c.endedAt!,
    taskCount: c.taskCount,
    tasks,
  };
}

/**
 * Appends `RunExpired` onto the run's purged (empty) subject; false when another sweep
 * expired it first (its event is then applied, and this one refused).
 */
async function expireRun(ctx: BackendContext, runId: string): Promise<boolean> {
  if (!ctx.loop.projection.runs.has(runId)) return false;
  try {
    await ctx.writer.write({
      subject: ctx.names.subjects.run(runId),
      type: 'RunExpired',
      data: runExpiredData(ctx.loop.projection, runId),
      id: `run-expired.${runId}`,
    });
    return true;
  } catch (err: unknown) {
    if (err instanceof IllegalTransitionError) return false;
    throw err;
  }
}

/** Appends `WorkerExpired` for each worker Left or Lost more than the retention ago. */
async function expireWorkers(ctx: BackendContext): Promise<string[]> {
  const now = ctx.now();
  const old: string[] = [];
  for (const [workerId, { snapshot }] of ctx.loop.projection.workers) {
    const { endedAt } = snapshot.context;
    if (snapshot.status !== 'done' || endedAt === null) continue;
    if (now - Date.parse(endedAt) > ctx.config.retentionMs) old.push(workerId);
  }
  const evicted: string[] = [];
  for (const workerId of old) {
    try {
      await ctx.writer.write({
        subject: ctx.names.subjects.worker(workerId),
        type: 'WorkerExpired',
        data: {},
        id: `worker-expired.${workerId}`,
      });
      evicted.push(workerId);
    } catch (err: unknown) {
      // Another sweep expired it first: its event is applied, and this one is refused.
      if (!(err instanceof IllegalTransitionError)) throw err;
    }
  }
  return evicted;
}

/** Purges one run's stored data in NATS, its run subject last (see applyRetention). */
async function purgeRun(ctx: BackendContext, runId: string): Promise<void> {
  const { jsm, names: n, loop } = ctx;
  const p = loop.projection;
  for (const stepId of p.runs.get(runId)?.snapshot.context.stepIds ?? []) {
    for (const key of p.stepTasks.get(`${runId}.${stepId}`) ?? []) {
      const ref = p.tasks.get(key)?.snapshot.context.output?.ref;
      if (ref !== undefined && ref !== 'inline') await ctx.outputs.delete(ref);
    }
  }
  const purge = (stream: string, filter: string) => jsm.streams.purge(stream, { filter });
  const kv = (bucket: string) => ({ stream: `KV_${bucket}`, keys: `$KV.${bucket}.${runId}.>` });
  // A sink of its own (the PostgreSQL table) deleted the run's rows before this; the KV
  // bucket is purged with the others below whichever sink is configured, as it may hold rows
  // of before.
  for (const bucket of [n.buckets.results, n.buckets.finalizeErrors]) {
    const { stream, keys } = kv(bucket);
    await purge(stream, keys);
  }
  await purge(n.streams.poison, n.subjects.poison(runId, '*'));
  await purge(n.streams.events, n.subjects.task(runId, '*'));
  await purge(n.streams.events, n.subjects.step(runId, '*'));
  await purge(n.streams.events, n.subjects.run(runId));
}
