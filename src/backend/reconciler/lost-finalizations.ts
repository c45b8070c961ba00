import { keyOf } from '../../../actors/ids.js';
import type { Projection } from '../../../actors/projection.js';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Names } from '../../../streams/names.js';
import { enqueueFinalization } from '../../../streams/queues.js';
import type { FinalizeJob } from '../../../streams/queues.js';
import { parseJobs } from '../finalize/index.js';
import { isNoMessage } from '../../../streams/errors.js';

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
  const ownSubject = (key: string): string => {
    const c = p.tasks.get(key)!.snapshot.context.spec;
    return n.subjects.finalize(c.runId, c.taskId);
  };
  // Jobs travel alone on their task's subject, or in a batch: read the batches only when a
  // task is on no subject of its own.
  const inBatches = candidates.some((key) => !Object.hasOwn(queued, ownSubject(key)))
    ? await tasksInBatches(jsm, n, queued, opts.batches ?? new Map<string, string[]>())
    : new Set<string>();
  const out: string[] = [];
  for (const key of candidates) {
    const entry = p.tasks.get(key);
    if (entry?.snapshot.value !== 'Finalizing') continue; // moved on meanwhile
    const c = entry.snapshot.context;
    const { runId, taskId } = c.spec;
    if (Object.hasOwn(queued, n.subjects.finalize(runId, taskId)) || inBatches.has(key)) continue;
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

/** Batch subject -> the tasks (`<runId>.<taskId>`) of its jobs. A batch never changes. */
export type BatchedTasks = Map<string, string[]>;

/**
 * The tasks of every batch still queued, read once per batch: `known` keeps what was read
 * (and forgets batches gone from the queue). A batch subject holds one message, its own.
 */
async function tasksInBatches(
  jsm: JetStreamManager,
  n: Names,
  queued: Record<string, number>,
  known: BatchedTasks,
): Promise<Set<string>> {
  const head = n.subjects.finalizeBatchAll.slice(0, -1);
  for (const subject of known.keys()) if (!Object.hasOwn(queued, subject)) known.delete(subject);
  const out = new Set<string>();
  for (const subject of Object.keys(queued)) {
    if (!subject.startsWith(head)) continue;
    let tasks = known.get(subject);
    if (!tasks) {
      tasks = await batchTasks(jsm, n, subject);
      known.set(subject, tasks);
    }
    for (const t of tasks) out.add(t);
  }
  return out;
}

async function batchTasks(jsm: JetStreamManager, n: Names, subject: string): Promise<string[]> {
  try {
    const m = await jsm.streams.getMessage(n.streams.finalize, { last_by_subj: subject });
    return m ? (parseJobs(m.data) ?? []).map((j) => keyOf(j.runId, j.taskId)) : [];
  } catch (err: unknown) {
    // Acked meanwhile: nothing of it is waiting.
    if (isNoMessage(err)) return [];
    throw err;
  }
}
