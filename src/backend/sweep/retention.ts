import type { Projection } from '../../../actors/projection.js';
import type { BackendContext } from '../context.js';

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
 * ago are purged by subject. The projection keeps each purged run's final state: a snapshot
 * holding it is stored first, and without a snapshot store nothing is purged.
 *
 * Order per run: outputs, results, error histories, poison records, task and step events,
 * and the run's own subject last. So a pass cut short is finished by the next one, and a run
 * whose run subject is empty is known to be purged (`purgedRuns` remembers those, so each
 * expired run costs one lookup per process, not one per pass).
 */
export async function applyRetention(
  ctx: BackendContext,
  snapshots: RetentionSnapshots | null,
  purgedRuns: Set<string>,
): Promise<RetentionReport> {
  const p = ctx.loop.projection;
  const found = expiredRuns(p, ctx.now(), ctx.config.retentionMs);
  const report: RetentionReport = {
    expired: 0,
    purged: [],
    open: found.open,
    skipped: null,
    snapshotSeq: null,
  };
  const todo: string[] = [];
  for (const runId of found.expired) {
    if (purgedRuns.has(runId)) continue;
    if ((await ctx.store.lastSeqOf(ctx.names.subjects.run(runId))) === 0) purgedRuns.add(runId);
    else todo.push(runId);
  }
  report.expired = todo.length;
  if (todo.length === 0) return report;
  if (!snapshots) {
    report.skipped = 'no-snapshots';
    return report;
  }
  const needed = Math.max(...todo.map((r) => lastSeqOfRun(p, r)));
  report.snapshotSeq = await snapshots.ensureCovers(needed);
  if (report.snapshotSeq < needed) {
    throw new Error(`snapshot holds seq ${report.snapshotSeq}, retention needs ${needed}`);
  }
  for (const runId of todo) {
    await purgeRun(ctx, runId);
    purgedRuns.add(runId);
    report.purged.push(runId);
  }
  return report;
}

/** Purges one run's stored data, its run subject last (see applyRetention). */
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
  for (const bucket of [n.buckets.results, n.buckets.finalizeErrors]) {
    const { stream, keys } = kv(bucket);
    await purge(stream, keys);
  }
  await purge(n.streams.poison, n.subjects.poison(runId, '*'));
  await purge(n.streams.events, n.subjects.task(runId, '*'));
  await purge(n.streams.events, n.subjects.step(runId, '*'));
  await purge(n.streams.events, n.subjects.run(runId));
}
