import { IllegalTransitionError, SonarError, ErrorCode } from '../../../actors/errors.js';
import { assertId } from '../../../actors/ids.js';
import { publishDispatch } from '../../../streams/queues.js';
import type { DispatchMessage } from '../../../streams/queues.js';
import { newId, newToken } from '../../ids.js';
import { tokenHashOf } from './attempt-token.js';
import type { BackendContext } from '../context.js';
import { SpanKind } from '@opentelemetry/api';
import { inSpan } from '../../tracing/tracer.js';
import { contextFromTraceparent, traceparentOf } from '../../tracing/traceparent.js';

/** What one dispatch did: the attempt it minted and where it went. */
export interface Dispatched {
  taskKey: string;
  tag: string;
  /** The task's publish count after this one (1, 2, ...). */
  attempt: number;
  attemptId: string;
}

/**
 * Publishes one Pending task as a new attempt (DESIGN.md sections 3, 4 and 6).
 *
 * Mints a fresh attemptId and a 32-byte token, appends `TaskPublished` (which keeps only the
 * token's sha256), then publishes the dispatch message, the one place the token travels, to
 * `<prefix>.dispatch.<tag>`. The append comes first: a message for an attempt the log does
 * not know would be refused at `start` anyway, whereas a crash after the append and before
 * the publish leaves a Published task without a message, which the next leader's dispatch
 * audit finds and requeues (see undeliveredAttempts).
 *
 * The caller (the reconciler) chooses the tag and makes sure `dispatch_<tag>` exists; a
 * message published before its consumer exists is delivered once it does.
 *
 * @param ctx - the backend; its projection must hold the task.
 * @param taskKey - `<runId>.<taskId>`.
 * @param tag - one of the task's tags.
 * @throws SonarError `not_found` when there is no such task; IllegalTransitionError when the
 *   task is not Pending (or another writer moved it first, twice).
 */
export async function dispatchTask(
  ctx: BackendContext,
  taskKey: string,
  tag: string,
): Promise<Dispatched> {
  assertId('tag', tag);
  const entry = ctx.loop.projection.tasks.get(taskKey);
  if (!entry) {
    throw new SonarError(ErrorCode.NotFound, `no task ${JSON.stringify(taskKey)}`, { taskKey });
  }
  const task = entry.snapshot.context;
  if (entry.snapshot.value !== 'Pending') {
    throw new IllegalTransitionError('task', entry.snapshot.value, 'TaskPublished');
  }
  const { runId, stepId, taskId } = task.spec;
  const attemptId = newId();
  const token = newToken();
  const attempt = task.attempt + 1;
  const publish = async (traceparent?: string): Promise<void> => {
    await ctx.writer.write({
      subject: ctx.names.subjects.task(runId, taskId),
      type: 'TaskPublished',
      data: { attempt, attemptId, tokenHash: tokenHashOf(token), tag },
      id: `publish.${attemptId}`,
    });
    const step = ctx.loop.projection.steps.get(`${runId}.${stepId}`)?.snapshot.context;
    const body: DispatchMessage = { runId, stepId, taskId, attempt, attemptId, token };
    if (task.spec.command !== undefined) body.command = task.spec.command;
    if (task.spec.input !== undefined) body.input = task.spec.input;
    if (step?.timeoutMs != null) body.timeoutMs = step.timeoutMs;
    if (step) body.output = step.output;
    await publishDispatch(ctx.publisher, ctx.names, tag, body, traceparent);
  };
  const runTrace = ctx.loop.projection.runs.get(runId)?.snapshot.context.traceparent;
  // A run nobody traced at submit gets no trace later.
  if (runTrace === undefined) await publish();
  else {
    // A span of this process, ended here: the run's trace context is only a parent, never a
    // span held open while the task waits. With no tracer provider, the run's context goes
    // on as it is.
    await inSpan(
      'dispatch',
      {
        kind: SpanKind.PRODUCER,
        parent: contextFromTraceparent(runTrace),
        attributes: {
          'sonar.run_id': runId,
          'sonar.step_id': stepId,
          'sonar.task_id': taskId,
          'sonar.attempt': attempt,
          'sonar.attempt_id': attemptId,
          'sonar.tag': tag,
        },
      },
      (_span, spanCtx) => publish(traceparentOf(spanCtx) ?? runTrace),
    );
  }
  return { taskKey, tag, attempt, attemptId };
}
