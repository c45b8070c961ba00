import type { JetStreamManager } from '@nats-io/jetstream';
import { parseJobs } from '../finalize/index.js';
import type { FailureLog } from '../finalize/index.js';
import { poisonHeldJob } from '../finalize/index.js';
import type { Poisoner } from '../finalize/index.js';
import type { BackendContext } from '../context.js';
import { deleteIfThere, scanStream } from '../storage/index.js';
import { caughtUpTask } from './task-catch-up.js';

/** What the stuck-job repair found and did. */
export interface StuckJobsReport {
  /** Jobs in the finalize queue that no delivery will ever reach again (from consumer info). */
  stuck: number;
  /** Moved to `SONAR_POISON` with their task Poisoned. */
  poisoned: number;
  /** Stale (their attempt is no longer Finalizing) or unreadable: deleted. */
  dropped: number;
  /** Stuck jobs the sweep could not tell from jobs still in hand: left, and logged. */
  unidentified: number;
}

export interface StuckJobsDeps {
  failures: FailureLog;
  poisoner: Poisoner;
}

/**
 * Moves finalization jobs stuck past max_deliver to poison (DESIGN.md section 7). On 2.9 such
 * a job stays in the work queue forever and holds the ack floor; the server announces it once
 * (MAX_DELIVERIES advisory), and this is the backstop for an announcement that was lost.
 *
 * The consumer tells how many there are, not which: a delivered job is either pending an ack
 * (in a lane, or waiting out a nak delay) or past max_deliver, so `stuck = stored - not yet
 * delivered - ack pending`. When that is 0 (the usual case) nothing is read. Otherwise the
 * delivered jobs are read and each is judged only on proof, since poisoning a job still in
 * hand would be wrong:
 * - its attempt is no longer Finalizing: the finalizer would drop it, so deleting is safe;
 * - its error history holds a failure of its last delivery (delivery >= max_deliver) in the
 *   current round: the finalizer's poison step failed, and the job is past max_deliver;
 * - a captured advisory still names it (no watcher handled it).
 * What is left unproven is counted as `unidentified` and logged: their advisories, if any
 * come, or an operator (`sonar poisoned`) deal with them.
 */
export async function moveStuckJobs(
  ctx: BackendContext,
  deps: StuckJobsDeps,
): Promise<StuckJobsReport> {
  const report: StuckJobsReport = { stuck: 0, poisoned: 0, dropped: 0, unidentified: 0 };
  const { jsm, names } = ctx;
  const stream = names.streams.finalize;
  const stuck = await countStuck(jsm, stream, names.consumers.finalizer);
  report.stuck = stuck.count;
  if (stuck.count === 0) return report;
  const held = { jsm, names, failures: deps.failures, poisoner: deps.poisoner };
  const advised = await advisedSeqs(ctx);
  let found = 0;
  for await (const m of scanStream(jsm, stream, names.subjects.finalizeAll)) {
    if (m.seq > stuck.deliveredSeq) break; // never delivered yet: not stuck
    const proven = advised.has(m.seq) || (await provenStuck(ctx, deps, m.data, stuck.maxDeliver));
    if (!proven) continue;
    found++;
    const advisory = advised.get(m.seq);
    const { outcome } = await poisonHeldJob(held, m.seq, advisory?.deliveries);
    if (outcome === 'poisoned') report.poisoned++;
    else if (outcome !== 'gone') report.dropped++;
    // Handled: its advisory, if any, need not wait for a watcher.
    if (advisory) await deleteIfThere(jsm, names.streams.advisories, advisory.seq);
  }
  report.unidentified = Math.max(0, stuck.count - found);
  return report;
}

/** How many jobs are past max_deliver, and up to which stream sequence anything was delivered. */
async function countStuck(
  jsm: JetStreamManager,
  stream: string,
  consumer: string,
): Promise<{ count: number; deliveredSeq: number; maxDeliver: number }> {
  // Stored first, then the consumer: a job enqueued in between is counted as not yet
  // delivered, never as stuck. One acked in between can only over-count; each stuck job is
  // still proven one by one below.
  const { state } = await jsm.streams.info(stream);
  const info = await jsm.consumers.info(stream, consumer);
  const count = state.messages - info.num_pending - info.num_ack_pending;
  return {
    count: Math.max(0, count),
    deliveredSeq: info.delivered.stream_seq,
    maxDeliver: info.config.max_deliver ?? -1,
  };
}

/** Proof that a delivered job is past max_deliver or harmless to delete (see moveStuckJobs). */
async function provenStuck(
  ctx: BackendContext,
  deps: StuckJobsDeps,
  data: Uint8Array,
  maxDeliver: number,
): Promise<boolean> {
  const queued = parseJobs(data);
  // Unreadable: the finalizer poisons it on its first delivery; still here means that failed.
  if (!queued) return true;
  // A batch is proven when each of its jobs is: those that finished are no longer Finalizing.
  for (const job of queued.jobs) {
    const task = await caughtUpTask(ctx, job.runId, job.taskId);
    const c = task?.snapshot.context;
    if (task?.snapshot.value !== 'Finalizing' || !c || c.attemptId !== job.attemptId) continue;
    if (job.round !== undefined && job.round !== c.finalizeRound) continue;
    if (maxDeliver <= 0) return false;
    const history = await deps.failures.history(job.runId, job.taskId, job.attemptId);
    if (!history.some((f) => f.round === c.finalizeRound && f.delivery >= maxDeliver)) {
      return false;
    }
  }
  return true;
}

/** Job stream seq -> its captured MAX_DELIVERIES advisory (own seq, deliveries). */
async function advisedSeqs(
  ctx: BackendContext,
): Promise<Map<number, { seq: number; deliveries: number | undefined }>> {
  const out = new Map<number, { seq: number; deliveries: number | undefined }>();
  const { names } = ctx;
  for await (const m of scanStream(
    ctx.jsm,
    names.streams.advisories,
    names.subjects.maxDeliveriesAdvisory,
  )) {
    try {
      const a = m.json<{ consumer?: string; stream_seq?: number; deliveries?: number }>();
      if (a.consumer === names.consumers.finalizer && typeof a.stream_seq === 'number') {
        out.set(a.stream_seq, { seq: m.seq, deliveries: a.deliveries });
      }
    } catch (_err: unknown) {
      // Not an advisory we can read: the watcher logs it.
    }
  }
  return out;
}
