import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';
import type { Names } from './names.js';

const encoder = new TextEncoder();

/** A dispatch message body (DESIGN.md section 6, step 3); the token travels only here. */
export interface DispatchBody {
  runId: string;
  stepId: string;
  taskId: string;
  attempt: number;
  attemptId: string;
  token: string;
  command?: string[];
  input?: unknown;
  timeoutMs?: number;
  /** The step's output kind: a worker checks its handler's result against it. */
  output?: 'json' | 'bytes';
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
  js: JetStreamClient,
  n: Names,
  tag: string,
  body: DispatchBody,
  traceparent?: string,
): Promise<PubAck> {
  return js.publish(n.subjects.dispatch(tag), encoder.encode(JSON.stringify(body)), {
    msgID: `dispatch.${body.attemptId}`,
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
