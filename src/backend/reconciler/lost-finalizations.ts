import { keyOf } from '../../../actors/ids.js';
import type { Projection } from '../../../actors/projection.js';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Names } from '../../../streams/names.js';
import { enqueueFinalization } from '../../../streams/queues.js';
import type { FinalizeJob } from '../../../streams/queues.js';
import { parseJobs } from '../finalize/index.js';
import { isNoMessage } from '../../../streams/errors.js';
import { inParallel } from '../in-parallel.js';

/**
 * Finalizing tasks whose result was accepted more than one lease ago: by then their job, if
 * it was ever enqueued, is in the queue (held, delayed or being worked on) or done.
 */
export function staleFinalizing(p: Projection, now: number, leaseMs: number): string[] {
  const out: string[] = [];
  for (const key of p.tasksByState.Finalizing) {
    const since = p.tasks.get(key)!.snapshot.context.since;
    if (since !== null && now - Date.parse(since) > leaseMs) out.push(key);
  }
  return out;
}

/**
 * Re-enqueues the finalization job of every Finalizing task whose subject holds no job once
 * its acceptance is older than one lease (DESIGN.md section 7: a crash between appending
 * `TaskResultAccepted` and enqueueing loses the job, never the result, which the event holds).
 * One stream-info call lists the subjects that hold a job. The msg id is the original one
 * (`fin.<runId>.<taskId>.<attemptId>.<round>`), so a job that is in fact there is not doubled
 * inside the dedupe window, and the finalizer drops any stale duplicate anyway.
 *
 * @returns the task keys re-enqueued.
 */
export async function reenqueueLostFinalizations(
  deps: { jsm: JetStreamManager; js: JetStreamClient; names: Names; projection: Projection },
  now: number,
  leaseMs: number,
  opts: {
    /** A msg id of the caller's own (the sweep), so that the original's dedupe cannot drop it. */
    msgId?: (job: FinalizeJob, round: number) => string;
    /** The tasks of batches read before, by subject: kept by a caller that asks again. */
    batches?: BatchedTasks;
  } = {},
): Promise<string[]> {
  const { jsm, js, names: n, projection: p } = deps;
  const candidates = staleFinalizing(p, now, leaseMs);
  if (candidates.length === 0) return [];
  const info = await jsm.streams.info(n.streams.finalize, {
    subjects_filter: n.subjects.finalizeAll,
  });
  const queued = info.state.subjects ?? {};
  // Jobs travel alone on their task's subject, or in a batch: read the batches only when a
  // task is on no subject of its own.
  const alone = (key: string): boolean => {
    const spec = p.tasks.get(key)?.snapshot.context.spec;
    return (
      spec !== undefined && Object.hasOwn(queued, n.subjects.finalize(spec.runId, spec.taskId))
    );
  };
  const inBatches = candidates.every(alone)
    ? new Set<string>()
    : await jobsInBatches(jsm, n, queued, opts.batches ?? new Map<string, string[]>());
  const out: string[] = [];
  for (const key of candidates) {
    const entry = p.tasks.get(key);
    if (entry?.snapshot.value !== 'Finalizing') continue; // moved on meanwhile
    const c = entry.snapshot.context;
    const { runId, taskId } = c.spec;
    if (Object.hasOwn(queued, n.subjects.finalize(runId, taskId))) continue;
    if (inBatches.has(batchedJobKey(key, c.attemptId ?? '', c.finalizeRound))) continue;
    if (c.attemptId === null || c.output === null) continue;
    const job: FinalizeJob = {
      runId,
      taskId,
      attemptId: c.attemptId,
      outputRef: c.output.ref,
      ...(c.output.inline !== null && { outputInline: c.output.inline }),
    };
    const ack = await enqueueFinalization(
      js,
      n,
      job,
      c.finalizeRound,
      opts.msgId?.(job, c.finalizeRound),
      // The result's own trace context went with the lost job: the run's stands in for it.
      p.runs.get(runId)?.snapshot.context.traceparent,
    );
    if (!ack.duplicate) out.push(keyOf(runId, taskId));
  }
  return out;
}

/** Batch subject -> its jobs, as {@link batchedJobKey}s. A batch never changes. */
export type BatchedTasks = Map<string, string[]>;

/** A job of a batch: its task, attempt and round (a poisoned job's entry may outlive it). */
const batchedJobKey = (task: string, attemptId: string, round: number): string =>
  `${task}/${attemptId}/${round}`;

/** Batches read at once: a pass after a long sink outage may find thousands queued. */
const BATCH_READS_IN_FLIGHT = 16;

/**
 * The jobs of every batch still queued, each batch read once: `known` keeps what was read
 * (and forgets batches gone from the queue). A batch subject holds one message, its own.
 */
async function jobsInBatches(
  jsm: JetStreamManager,
  n: Names,
  queued: Record<string, number>,
  known: BatchedTasks,
): Promise<Set<string>> {
  const head = n.subjects.finalizeBatchAll.slice(0, -1);
  for (const subject of known.keys()) if (!Object.hasOwn(queued, subject)) known.delete(subject);
  const unread = Object.keys(queued).filter((s) => s.startsWith(head) && !known.has(s));
  const read = await inParallel(unread, BATCH_READS_IN_FLIGHT, (s) => batchJobs(jsm, n, s));
  read.forEach((r, i) => {
    if (r.status === 'fulfilled') known.set(unread[i]!, r.value);
  });
  // Unknown is not lost: the pass tries again next time.
  const failed = read.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  const out = new Set<string>();
  for (const subject of Object.keys(queued)) for (const j of known.get(subject) ?? []) out.add(j);
  return out;
}

async function batchJobs(jsm: JetStreamManager, n: Names, subject: string): Promise<string[]> {
  try {
    const m = await jsm.streams.getMessage(n.streams.finalize, { last_by_subj: subject });
    return (m ? (parseJobs(m.data)?.jobs ?? []) : []).map((j) =>
      batchedJobKey(keyOf(j.runId, j.taskId), j.attemptId, j.round ?? 0),
    );
  } catch (err: unknown) {
    // Acked meanwhile: nothing of it is waiting.
    if (isNoMessage(err)) return [];
    throw err;
  }
}
