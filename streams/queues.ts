import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';
import { z } from 'zod';
import { ID_RE } from '../actors/ids.js';
import type { AckedPublisher, PublishAck } from './acked-publisher.js';
import type { Names } from './names.js';

const encoder = new TextEncoder();

const id = z.string().regex(ID_RE, 'must match ^[A-Za-z0-9_-]{1,64}$');

/**
 * A dispatch message (DESIGN.md section 6, step 3); the token travels only here. Not strict:
 * a worker takes what it knows from a newer or older backend's message and ignores the rest.
 */
export const dispatchMessageSchema = z.object({
  runId: id,
  stepId: id,
  taskId: id,
  attempt: z.number().int().min(1),
  attemptId: id,
  token: z.string().min(1),
  command: z.array(z.string()).min(1).optional(),
  input: z.unknown().optional(),
  /** The step's own limit, enforced by the worker (SIGTERM, then SIGKILL 5 s later). */
  timeoutMs: z.number().int().min(1).optional(),
  /**
   * The step's output kind. A `json` result that is not JSON fails the attempt at the worker
   * (not retryable) instead of poisoning its finalization. Absent from an older backend: the
   * worker does not check.
   */
  output: z.enum(['json', 'bytes']).optional(),
});
export type DispatchMessage = z.output<typeof dispatchMessageSchema>;

/** The task and attempt a dispatch message is for: what the backend reads back from the stream. */
export type DispatchRef = Pick<DispatchMessage, 'runId' | 'taskId' | 'attemptId'>;

const dispatchRefSchema = dispatchMessageSchema.pick({
  runId: true,
  taskId: true,
  attemptId: true,
});

/** The task and attempt of a stored dispatch message, or null when it does not name them. */
export function dispatchRefOf(m: { json<T>(): T }): DispatchRef | null {
  let raw: unknown;
  try {
    raw = m.json<unknown>();
  } catch (_err: unknown) {
    return null;
  }
  const parsed = dispatchRefSchema.safeParse(raw);
  return parsed.success ? parsed.data : null;
}

/**
 * The W3C trace context header of dispatch messages and finalization jobs (docs/tracing.md):
 * a header, not a body field, so that a reader that does not know it never sees it.
 */
export const TRACEPARENT_HEADER = 'traceparent';

function traceHeaders(traceparent: string | undefined): { headers: MsgHdrs } | object {
  if (traceparent === undefined) return {};
  const h = headers();
  h.set(TRACEPARENT_HEADER, traceparent);
  return { headers: h };
}

/**
 * Publishes a task to `<prefix>.dispatch.<tag>`; the attempt id dedupes a retried publish.
 * `traceparent`, when given, travels as the message's header: the worker's attempt span is
 * its child.
 */
export function publishDispatch(
  publisher: AckedPublisher,
  n: Names,
  tag: string,
  body: DispatchMessage,
  traceparent?: string,
): Promise<PublishAck> {
  return publisher.publish({
    subject: n.subjects.dispatch(tag),
    payload: encoder.encode(JSON.stringify(body)),
    msgId: `dispatch.${body.attemptId}`,
    ...traceHeaders(traceparent),
  });
}

/** A finalization job (DESIGN.md section 7). */
export interface FinalizeJob {
  runId: string;
  taskId: string;
  attemptId: string;
  outputRef: string;
  outputInline?: string;
}

/**
 * A job of a batch: the job, its operator retry round (a poisoned job's entry may outlive
 * the poison in a batch still queued for its mates: a retried task's new round is not its
 * business), and the trace context a single job carries in its header.
 */
export interface BatchedJob extends FinalizeJob {
  round: number;
  traceparent?: string;
}

/** The job of DESIGN.md section 7 alone, without what a batch entry adds. */
export function plainJob(job: FinalizeJob | BatchedJob): FinalizeJob {
  const { runId, taskId, attemptId, outputRef, outputInline } = job;
  return {
    runId,
    taskId,
    attemptId,
    outputRef,
    ...(outputInline !== undefined && { outputInline }),
  };
}

/** The most jobs in one batch, well above what a message holds at the usual output sizes. */
export const FINALIZE_BATCH_MAX = 1_000;

/**
 * Several jobs of inline outputs in one message (`{"jobs": [...]}`): one publish, delivery and
 * ack instead of one each. Only inline outputs travel together, so that a batch reads no
 * output store and the pool still bounds how many outputs are read at once.
 */
export interface FinalizeBatch {
  jobs: BatchedJob[];
}

/** `fin.<runId>.<taskId>.<attemptId>.<n>`: n = 0, then the number of the operator retry. */
export const finalizeMsgId = (job: FinalizeJob, round: number): string =>
  `fin.${job.runId}.${job.taskId}.${job.attemptId}.${round}`;

/**
 * Enqueues a job on `<prefix>.finalize.<runId>.<taskId>`. `msgId` replaces the usual id only
 * for a repair that must land even inside the dedupe window of the original (the full sweep).
 */
export function enqueueFinalization(
  js: JetStreamClient,
  n: Names,
  job: FinalizeJob,
  round = 0,
  msgId: string = finalizeMsgId(job, round),
  traceparent?: string,
): Promise<PubAck> {
  return js.publish(
    n.subjects.finalize(job.runId, job.taskId),
    encoder.encode(JSON.stringify(job)),
    { msgID: msgId, ...traceHeaders(traceparent) },
  );
}

/**
 * Enqueues a batch on `<prefix>.finalize._batch.<id>`, msg id `fin.batch.<id>`: a publish
 * sent again with the same id is stored once.
 */
export function enqueueFinalizationBatch(
  js: JetStreamClient,
  n: Names,
  batch: FinalizeBatch,
  id: string,
): Promise<PubAck> {
  return js.publish(n.subjects.finalizeBatch(id), encoder.encode(JSON.stringify(batch)), {
    msgID: `fin.batch.${id}`,
  });
}

/** The batch id of a batch subject (its last token). */
export const batchIdOf = (subject: string): string => subject.slice(subject.lastIndexOf('.') + 1);
