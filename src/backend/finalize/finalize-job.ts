import { z } from 'zod';
import { IllegalTransitionError } from '../../../actors/errors.js';
import type { StepContext } from '../../../actors/step/step.machine.js';
import type { TaskContext } from '../../../actors/task/task.machine.js';
import type { EventStore } from '../../../streams/event-store.js';
import type { Names } from '../../../streams/names.js';
import { FINALIZE_BATCH_MAX } from '../../../streams/queues.js';
import type { BatchedJob, FinalizeJob } from '../../../streams/queues.js';
import { resultKeyOf } from '../../storage/results-sink.js';
import type { ResultsSink, UpsertOutcome } from '../../storage/results-sink.js';
import type { EventWriter, Written } from '../projection/index.js';
import { withDeadline } from './finalize-deadline.js';
import { SpanKind } from '@opentelemetry/api';
import { inSpan } from '../../tracing/tracer.js';
import { prepareOutput } from './finalize-output.js';
import type { OutputDeps } from './finalize-output.js';
import type { ProjectionLoop } from '../projection/index.js';

export { PermanentFinalizeError, isPermanentFinalizeError } from './finalize-errors.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);
const jobSchema = z.object({
  runId: id,
  taskId: id,
  attemptId: id,
  outputRef: z.string().min(1),
  outputInline: z.string().optional(),
});

const batchSchema = z.object({
  jobs: z
    .array(
      jobSchema.extend({
        round: z.number().int().min(0),
        traceparent: z.string().max(256).optional(),
      }),
    )
    .min(1)
    .max(FINALIZE_BATCH_MAX),
});

/** A job off the queue: a single one (no round: it is fenced by its attempt), or a batch's. */
export type QueuedJob = FinalizeJob & Partial<Pick<BatchedJob, 'round' | 'traceparent'>>;

/** What a message of the queue holds: its jobs, and whether it is a batch. */
export interface QueuedMessage {
  jobs: QueuedJob[];
  batch: boolean;
}

const decoder = new TextDecoder();

/**
 * The jobs of a message off the queue: one for a single job, several for a batch; null when
 * the payload is neither (it is poisoned, not retried).
 */
export function parseJobs(data: Uint8Array): QueuedMessage | null {
  let raw: unknown;
  try {
    raw = JSON.parse(decoder.decode(data));
  } catch (_err: unknown) {
    return null;
  }
  const single = jobSchema.safeParse(raw);
  if (single.success) return { jobs: [single.data], batch: false };
  const batch = batchSchema.safeParse(raw);
  return batch.success ? { jobs: batch.data.jobs, batch: true } : null;
}

/** What a job needs from its backend. */
export interface JobDeps extends OutputDeps {
  names: Names;
  store: EventStore;
  loop: ProjectionLoop;
  writer: EventWriter;
  sink: ResultsSink;
  now: () => number;
}

/** The task a job may still finalize, with its step (for the declared output kind). */
export interface CurrentTask {
  task: TaskContext;
  step: StepContext | undefined;
}

function lookup(deps: Pick<JobDeps, 'loop'>, job: QueuedJob): CurrentTask | null {
  const p = deps.loop.projection;
  const entry = p.tasks.get(`${job.runId}.${job.taskId}`);
  if (entry?.snapshot.value !== 'Finalizing') return null;
  const task = entry.snapshot.context;
  if (task.attemptId !== job.attemptId) return null;
  if (job.round !== undefined && job.round !== task.finalizeRound) return null;
  return { task, step: p.steps.get(`${job.runId}.${task.spec.stepId}`)?.snapshot.context };
}

/**
 * The task when it is Finalizing with the job's attempt, else null (a stale or duplicate job).
 * Before calling a job stale, the projection catches up with the task's subject: the result
 * may have been accepted by another backend whose event this one has not applied yet.
 */
export async function currentFinalizing(
  deps: Pick<JobDeps, 'loop' | 'store' | 'names'>,
  job: QueuedJob,
): Promise<CurrentTask | null> {
  const found = lookup(deps, job);
  if (found) return found;
  const subject = deps.names.subjects.task(job.runId, job.taskId);
  await deps.loop.waitFor(await deps.store.lastSeqOf(subject));
  return lookup(deps, job);
}

export type JobOutcome =
  | {
      kind: 'finalized';
      sink: UpsertOutcome;
      /** The task as it was Finalizing, and what this job's write stored. */
      moved: { task: TaskContext; written: Written };
    }
  | { kind: 'stale'; reason: string };

/**
 * Runs one job: only while the task is Finalizing with the job's attempt, check and validate
 * the output (streamed, never whole in memory), upsert it into the sink, then append
 * `TaskFinalized`. Every object read and the sink write has a deadline (`ioTimeoutMs`).
 * Throws on failure (PermanentFinalizeError when no retry can help); the pool acks, naks or
 * poisons.
 */
export async function runFinalizeJob(deps: JobDeps, job: QueuedJob): Promise<JobOutcome> {
  const key = resultKeyOf(job.runId, job.taskId);
  const current = await currentFinalizing(deps, job);
  if (!current) return { kind: 'stale', reason: 'task is not finalizing this attempt' };
  const { task, step } = current;
  const kind = step?.output ?? 'bytes';
  const output = await prepareOutput(deps, job, task, kind);
  const record = {
    runId: job.runId,
    stepId: task.spec.stepId,
    taskId: job.taskId,
    attemptId: job.attemptId,
    attempt: task.attempt,
    startedAt: task.startedAt ?? null,
    // While Finalizing, `since` is the time the result was accepted.
    finishedAt: task.since,
    outputRef: job.outputRef,
    bytes: output.bytes,
    kind,
    finalizedAt: new Date(deps.now()).toISOString(),
  };
  // A span of its own inside the job's: the sink is the one call out of NATS.
  const sink = await inSpan(
    'sink write',
    {
      kind: SpanKind.CLIENT,
      onlyInTrace: true,
      attributes: {
        'sonar.run_id': job.runId,
        'sonar.task_id': job.taskId,
        'sonar.attempt_id': job.attemptId,
        'sonar.output_bytes': output.bytes,
      },
    },
    () =>
      withDeadline(`sink write of ${key}`, deps.ioTimeoutMs, (signal) =>
        deps.sink.upsert(record, output, signal),
      ),
  );
  let written: Written;
  try {
    written = await deps.writer.write({
      subject: deps.names.subjects.task(job.runId, job.taskId),
      type: 'TaskFinalized',
      data: { attemptId: job.attemptId, resultKey: key },
      // One TaskFinalized per attempt ever: a retried append inside the window is stored once.
      id: `finalized.${job.runId}.${job.taskId}.${job.attemptId}`,
    });
  } catch (err: unknown) {
    // Another finalizer (a duplicate job) or a cancel moved the task first: nothing to do.
    if (err instanceof IllegalTransitionError) return { kind: 'stale', reason: err.message };
    throw err;
  }
  return { kind: 'finalized', sink, moved: { task, written } };
}
