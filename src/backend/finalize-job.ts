import { z } from 'zod';
import { ErrorCode, IllegalTransitionError, SonarError } from '../../actors/errors.js';
import type { StepContext } from '../../actors/step/step.machine.js';
import type { TaskContext } from '../../actors/task/task.machine.js';
import type { EventStore } from '../../streams/event-store.js';
import type { Names } from '../../streams/names.js';
import type { FinalizeJob } from '../../streams/queues.js';
import type { OutputStore } from '../storage/output-store.js';
import { resultKeyOf } from '../storage/results-sink.js';
import type { ResultsSink, UpsertOutcome } from '../storage/results-sink.js';
import type { EventWriter } from './event-writer.js';
import type { ProjectionLoop } from './projection-loop.js';

/** A failure that no retry can fix: the output is missing or invalid. Poisons at once. */
export class PermanentFinalizeError extends SonarError {
  override readonly name = 'PermanentFinalizeError';
  constructor(message: string, details: Record<string, unknown> = {}) {
    super(ErrorCode.Validation, message, details);
  }
}

export const isPermanentFinalizeError = (e: unknown): e is PermanentFinalizeError =>
  e instanceof PermanentFinalizeError;

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);
const jobSchema = z.object({
  runId: id,
  taskId: id,
  attemptId: id,
  outputRef: z.string().min(1),
  outputInline: z.string().optional(),
});

const decoder = new TextDecoder();
// fatal: a JSON step's output must be valid UTF-8 too, not silently patched with U+FFFD.
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A job off the queue, or null when the payload is not one (it is poisoned, not retried). */
export function parseJob(data: Uint8Array): FinalizeJob | null {
  try {
    const parsed = jobSchema.safeParse(JSON.parse(decoder.decode(data)));
    return parsed.success ? parsed.data : null;
  } catch (_err: unknown) {
    return null;
  }
}

/** What a job needs from its backend. */
export interface JobDeps {
  names: Names;
  store: EventStore;
  loop: ProjectionLoop;
  writer: EventWriter;
  outputs: OutputStore;
  sink: ResultsSink;
  now: () => number;
}

/** The task a job may still finalize, with its step (for the declared output kind). */
export interface CurrentTask {
  task: TaskContext;
  step: StepContext | undefined;
}

function lookup(deps: Pick<JobDeps, 'loop'>, job: FinalizeJob): CurrentTask | null {
  const p = deps.loop.projection;
  const entry = p.tasks.get(`${job.runId}.${job.taskId}`);
  if (entry?.snapshot.value !== 'Finalizing') return null;
  const task = entry.snapshot.context;
  if (task.attemptId !== job.attemptId) return null;
  return { task, step: p.steps.get(`${job.runId}.${task.spec.stepId}`)?.snapshot.context };
}

/**
 * The task when it is Finalizing with the job's attempt, else null (a stale or duplicate job).
 * Before calling a job stale, the projection catches up with the task's subject: the result
 * may have been accepted by another backend whose event this one has not applied yet.
 */
export async function currentFinalizing(
  deps: Pick<JobDeps, 'loop' | 'store' | 'names'>,
  job: FinalizeJob,
): Promise<CurrentTask | null> {
  const found = lookup(deps, job);
  if (found) return found;
  const subject = deps.names.subjects.task(job.runId, job.taskId);
  await deps.loop.waitFor(await deps.store.lastSeqOf(subject));
  return lookup(deps, job);
}

/**
 * The output bytes: inline from the job, else inline from the accepted result (a job
 * re-enqueued by the reconciler may not carry them), else from the output store.
 */
export async function readOutput(
  outputs: OutputStore,
  job: FinalizeJob,
  task: TaskContext,
): Promise<Uint8Array> {
  const inline = job.outputInline ?? (job.outputRef === 'inline' ? task.output?.inline : null);
  if (inline !== null && inline !== undefined) return Buffer.from(inline, 'base64');
  if (job.outputRef === 'inline') {
    throw new PermanentFinalizeError(
      `output of ${job.runId}.${job.taskId} is missing: no inline bytes`,
    );
  }
  const bytes = await outputs.get(job.outputRef);
  if (bytes === null) {
    throw new PermanentFinalizeError(
      `output ${JSON.stringify(job.outputRef)} of ${job.runId}.${job.taskId} is missing from the output store`,
      { outputRef: job.outputRef },
    );
  }
  return bytes;
}

/** A step with `output: "json"` needs valid JSON (DESIGN.md section 7). */
export function validateOutput(kind: 'json' | 'bytes', bytes: Uint8Array, key: string): void {
  if (kind !== 'json') return;
  try {
    JSON.parse(strictUtf8.decode(bytes));
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw new PermanentFinalizeError(`output of ${key} is not valid JSON: ${why}`);
  }
}

export type JobOutcome =
  { kind: 'finalized'; sink: UpsertOutcome } | { kind: 'stale'; reason: string };

/**
 * Runs one job: only while the task is Finalizing with the job's attempt, read the output,
 * validate it, upsert it into the sink, then append `TaskFinalized`. Throws on failure
 * (PermanentFinalizeError when no retry can help); the pool acks, naks or poisons.
 */
export async function runFinalizeJob(deps: JobDeps, job: FinalizeJob): Promise<JobOutcome> {
  const key = resultKeyOf(job.runId, job.taskId);
  const current = await currentFinalizing(deps, job);
  if (!current) return { kind: 'stale', reason: 'task is not finalizing this attempt' };
  const { task, step } = current;
  const kind = step?.output ?? 'bytes';
  const output = await readOutput(deps.outputs, job, task);
  validateOutput(kind, output, key);
  const sink = await deps.sink.upsert(
    {
      runId: job.runId,
      stepId: task.spec.stepId,
      taskId: job.taskId,
      attemptId: job.attemptId,
      outputRef: job.outputRef,
      bytes: output.byteLength,
      kind,
      finalizedAt: new Date(deps.now()).toISOString(),
    },
    output,
  );
  try {
    await deps.writer.write({
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
  return { kind: 'finalized', sink };
}
