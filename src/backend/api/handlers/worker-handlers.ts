import {
  ErrorCode,
  IllegalTransitionError,
  SonarError,
  ValidationError,
} from '../../../../actors/errors.js';
import { keyOf } from '../../../../actors/ids.js';
import { DEFAULT_RETRY_POLICY, retryDelayMs } from '../../../../actors/task/retry-policy.js';
import type { TaskContext } from '../../../../actors/task/task.machine.js';
import { isConcurrencyError } from '../../../../streams/errors.js';
import { assertOutputSize } from '../../../limits.js';
import { assertSlotsFit, DEFAULT_MAX_PAYLOAD } from '../../../pulse-size.js';
import type { JoinReply, ParsedRequestOf } from '../../../protocol.js';
import { INLINE_OUTPUT_MAX, outputKey } from '../../../storage/output-store.js';
import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import { StagedOutputs } from '../staged-outputs.js';
import { JobBatcher } from '../../finalize/index.js';
import { reportStage } from '../../task-stage-timing.js';
import { didHappen, resolveAttempt, staleError } from './attempt.js';
import type { AttemptRequest, ResolvedAttempt } from './attempt.js';
import type { WorkerSnapshot } from '../../../../actors/projection.js';
import { goneError, notJoinedError, requireLiveWorker, workerOf } from './worker-state.js';

/** The answer to every attempt-scoped request: the same for a retry (DESIGN.md section 6). */
const attemptReply = (req: AttemptRequest) => ({
  runId: req.runId,
  taskId: req.taskId,
  attemptId: req.attemptId,
});

/**
 * When a failed task may run again: its step's retry policy (the default: 1 s doubling per
 * failure so far, capped at 5 min, DESIGN.md section 6), jitter drawn here, in src/, so that
 * the event records the one time every reader folds.
 */
function retryAtOf(ctx: BackendContext, task: TaskContext): string {
  const { runId, stepId } = task.spec;
  const policy = ctx.loop.projection.steps.get(keyOf(runId, stepId))?.snapshot.context.retry;
  const waitMs = retryDelayMs(policy ?? DEFAULT_RETRY_POLICY, task.failures, Math.random());
  return new Date(ctx.now() + waitMs).toISOString();
}

interface AttemptVerb {
  /** The event this verb appends. */
  type: 'TaskStarted' | 'TaskResultAccepted' | 'TaskAttemptFailed' | 'TaskRequeued';
  /** Task states the verb acts from. */
  from: readonly string[];
  /** Appends the event; called only for the current attempt in a `from` state. */
  write(a: ResolvedAttempt): Promise<unknown>;
  /** Whether a stored event of `type` for this attempt is this request carried out before. */
  done: (data: Record<string, unknown>) => boolean;
  /**
   * Whether a retry may be answered once the attempt is no longer current. Not for start:
   * running a task that has moved on is wasted work, so the worker is told to drop it.
   */
  retryWhenStale: boolean;
  /** Re-runs the follow-up of a request carried out before (e.g. the finalization enqueue). */
  again?(): Promise<unknown>;
  /** Refuses the request for this worker before anything is appended. */
  allowed?(a: ResolvedAttempt, worker: WorkerSnapshot): void;
}

/**
 * The shape every attempt-scoped verb shares. Credentials first (nothing is appended for a
 * stale attempt or a wrong token); then the current attempt in the right state appends its
 * event; otherwise, when the log shows this very request carried out before (a retry after
 * a lost reply), the answer is the same and nothing new is appended.
 */
async function handleAttempt(
  ctx: BackendContext,
  req: AttemptRequest,
  verb: AttemptVerb,
): Promise<ReturnType<typeof attemptReply>> {
  const worker = await requireLiveWorker(ctx, req.workerId);
  // requireLiveWorker caught up with the whole stream as of this request: the task too.
  const a = await resolveAttempt(ctx, req, { synced: true });
  verb.allowed?.(a, worker);
  const holder = a.task.context.workerId;
  // A redelivered dispatch message can hand one attempt to two workers: only the one that
  // started it may report on it.
  const heldByOther = holder !== null && holder !== req.workerId;
  if (a.current && verb.from.includes(a.task.value) && !heldByOther) {
    try {
      await verb.write(a);
      return attemptReply(req);
    } catch (err: unknown) {
      // Another writer moved the task first; the log below says whether it was this request.
      if (!(err instanceof IllegalTransitionError)) throw err;
    }
  }
  if ((a.current || verb.retryWhenStale) && (await didHappen(a, req, verb.type, verb.done))) {
    await verb.again?.();
    return attemptReply(req);
  }
  if (!a.current) throw staleError(req, 'is no longer current: the task has moved on');
  if (heldByOther) throw staleError(req, `is held by worker ${holder}`);
  const now = ctx.loop.projection.tasks.get(keyOf(req.runId, req.taskId))?.snapshot.value;
  throw new IllegalTransitionError('task', now ?? a.task.value, verb.type);
}

const sameWorker = (req: AttemptRequest) => (d: Record<string, unknown>) =>
  d['workerId'] === req.workerId;

/**
 * Checks a result's output against the inline and SONAR_MAX_OUTPUT limits, and that a stored
 * output is the attempt's own object (where the worker SDK uploads it), so that a result
 * cannot finalize another task's output.
 */
function checkOutput(req: ParsedRequestOf<'result'>, maxOutputBytes: number): void {
  const { output } = req;
  assertOutputSize('output.bytes', output.bytes, maxOutputBytes);
  if (!('inline' in output)) {
    const own = outputKey(req.runId, req.taskId, req.attemptId);
    if (output.ref === own) return;
    const message = `'output.ref' is ${JSON.stringify(output.ref)}, not this attempt's own object ${JSON.stringify(own)}: upload the output under <runId>/<taskId>/<attemptId>`;
    throw new ValidationError(message, [{ path: 'output.ref', message }]);
  }
  const decoded = Buffer.byteLength(output.inline, 'base64');
  if (decoded !== output.bytes) {
    const message = `'output.bytes' is ${output.bytes} but 'output.inline' decodes to ${decoded} bytes`;
    throw new ValidationError(message, [{ path: 'output.bytes', message }]);
  }
  if (decoded > INLINE_OUTPUT_MAX) {
    const message = `'output.inline' is ${decoded} bytes, over the ${INLINE_OUTPUT_MAX}-byte inline limit: upload it to the output store and send its ref`;
    throw new ValidationError(message, [{ path: 'output.inline', message }]);
  }
}

/** The worker verbs of DESIGN.md section 6: join, start, result, fail, release, drain, leave, exited. */
export function workerHandlers(ctx: BackendContext): Handlers {
  const { names: n, writer } = ctx;
  const staged = new StagedOutputs(ctx);

  /** The task's `since` now: its write was applied, so the time the move was stored. */
  const movedAt = (req: AttemptRequest): number | null => {
    const task = ctx.loop.projection.tasks.get(keyOf(req.runId, req.taskId))?.snapshot.context;
    return task?.since == null ? null : Date.parse(task.since);
  };

  // Half the server's max_payload: room for the headers and the JSON around the jobs.
  const jobs = new JobBatcher(
    ctx.js,
    n,
    ctx.config.finalizeBatch,
    Math.floor((ctx.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD) / 2),
  );

  /**
   * Enqueues the finalization job of the task's accepted result, with the `result` request's
   * trace context: the finalization joins the trace. The first enqueue may share a message
   * with other results'; a repeat (a retried `result`) goes alone, under the job's msg id, so
   * that it is stored once.
   */
  const enqueue = async (
    req: AttemptRequest,
    traceparent: string | undefined,
    first: boolean,
  ): Promise<void> => {
    const task = ctx.loop.projection.tasks.get(keyOf(req.runId, req.taskId))?.snapshot;
    if (!task || task.value !== 'Finalizing' || task.context.attemptId !== req.attemptId) return;
    const output = task.context.output;
    if (!output) return;
    const job = {
      runId: req.runId,
      taskId: req.taskId,
      attemptId: req.attemptId,
      outputRef: output.ref,
      ...(output.inline !== null && { outputInline: output.inline }),
    };
    const round = task.context.finalizeRound;
    await (first ? jobs.enqueue(job, round, traceparent) : jobs.single(job, round, traceparent));
  };

  return {
    join: async (req): Promise<JoinReply> => {
      // A worker whose pulse cannot fit in a message would lose its key at its first busy
      // pulse, and its tasks with it: refused before anything is written.
      assertSlotsFit(req.slots, ctx.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD);
      const reply: JoinReply = {
        pulseIntervalMs: ctx.config.pulseIntervalMs,
        pulseTtlMs: ctx.config.pulseTtlMs,
        stream: n.streams.dispatch,
        consumers: Object.fromEntries(req.tags.map((t) => [t, n.consumers.dispatch(t)])),
      };
      const check = (state: string, joined: ReturnType<typeof joinedData>): void => {
        if (state === 'Lost' || state === 'Left') throw goneError(req.workerId, state);
        if (JSON.stringify(joined) !== JSON.stringify(joinedData(req))) {
          throw conflictingJoin(req.workerId);
        }
      };
      const existing = await workerOf(ctx, req.workerId);
      if (existing) check(existing.value, joinedData(existing.context));
      // The consumers exist before the answer: the worker binds to them right after.
      // Always asked of the server, never of the cache: a worker whose consumer was deleted
      // (the sweep) joins again to have it recreated.
      await Promise.all(req.tags.map((t) => ctx.dispatchConsumers.ensure(t, { force: true })));
      if (existing) return reply;
      try {
        await writer.write({
          subject: n.subjects.worker(req.workerId),
          type: 'WorkerJoined',
          data: {
            workerId: req.workerId,
            host: req.host,
            ...(req.instanceId !== undefined && { instanceId: req.instanceId }),
            tags: req.tags,
            slots: req.slots,
          },
          id: `join.${req.workerId}`,
        });
      } catch (err: unknown) {
        // Its subject holds events the projection no longer has: a worker that ended and
        // was expired by retention. The id was used once already.
        if (isConcurrencyError(err) && !(await workerOf(ctx, req.workerId))) {
          throw goneError(req.workerId, 'Expired');
        }
        // Two joins raced (a retry on another backend): the same join data answers the same.
        if (!(err instanceof IllegalTransitionError)) throw err;
        const now = await workerOf(ctx, req.workerId);
        if (!now) throw err;
        check(now.value, joinedData(now.context));
      }
      return reply;
    },

    start: (req) =>
      handleAttempt(ctx, req, {
        type: 'TaskStarted',
        from: ['Published'],
        retryWhenStale: false,
        write: async (a) => {
          const written = await writer.write({
            subject: a.subject,
            type: 'TaskStarted',
            data: { attemptId: req.attemptId, workerId: req.workerId },
            id: `start.${req.attemptId}`,
          });
          reportStage(ctx.nodeId, 'queue', a.task.context, written, movedAt(req));
        },
        done: sameWorker(req),
        allowed: servesTag,
      }),

    result: (req, call) => {
      checkOutput(req, ctx.config.maxOutputBytes);
      const inline = 'inline' in req.output ? req.output.inline : undefined;
      return handleAttempt(ctx, req, {
        type: 'TaskResultAccepted',
        from: ['Running'],
        retryWhenStale: true,
        write: async (a) => {
          // Called for the attempt's holder only: what it staged becomes the attempt's object.
          if (inline === undefined && 'ref' in req.output) {
            await staged.commit(req.workerId, req.attemptId, req.output.ref, req.output.bytes);
          }
          // The event holds an inline output itself, so a crash before the enqueue loses
          // nothing: the reconciler (or this request's retry) enqueues again.
          const written = await writer.write({
            subject: a.subject,
            type: 'TaskResultAccepted',
            data: {
              attemptId: req.attemptId,
              workerId: req.workerId,
              outputRef: inline === undefined && 'ref' in req.output ? req.output.ref : 'inline',
              outputBytes: req.output.bytes,
              ...(inline !== undefined && { outputInline: inline }),
            },
            id: `result.${req.attemptId}`,
          });
          reportStage(ctx.nodeId, 'run', a.task.context, written, movedAt(req));
          await enqueue(req, call.traceparent, true);
        },
        done: sameWorker(req),
        again: () => enqueue(req, call.traceparent, false),
      });
    },

    fail: (req) =>
      handleAttempt(ctx, req, {
        type: 'TaskAttemptFailed',
        from: ['Running'],
        retryWhenStale: true,
        write: (a) =>
          writer.write({
            subject: a.subject,
            type: 'TaskAttemptFailed',
            data: {
              attemptId: req.attemptId,
              workerId: req.workerId,
              exitCode: req.exitCode,
              error: req.error,
              retryable: req.retryable,
              retryAt: retryAtOf(ctx, a.task.context),
            },
            id: `fail.${req.attemptId}`,
          }),
        done: sameWorker(req),
      }),

    release: (req) =>
      handleAttempt(ctx, req, {
        type: 'TaskRequeued',
        from: ['Published', 'Running'],
        retryWhenStale: true,
        write: (a) =>
          writer.write({
            subject: a.subject,
            type: 'TaskRequeued',
            // Only worker-lost recoveries count; the field carries the count as it stands.
            data: {
              attemptId: req.attemptId,
              reason: 'worker-released',
              recoveries: a.task.context.recoveries,
            },
            id: `release.${req.attemptId}`,
          }),
        done: (d) => d['reason'] === 'worker-released',
      }),

    drain: async (req) => {
      const worker = await requireLiveWorker(ctx, req.workerId);
      if (worker.value === 'Draining') return { workerId: req.workerId };
      try {
        await writer.write({
          subject: n.subjects.worker(req.workerId),
          type: 'WorkerDraining',
          data: {
            reason: req.reason,
            ...(req.deadline !== undefined && { deadline: req.deadline }),
          },
          id: `drain.${req.workerId}`,
        });
      } catch (err: unknown) {
        if (!(err instanceof IllegalTransitionError)) throw err;
        // Drained meanwhile (a retry on another backend) is the same answer; gone is not.
        await requireLiveWorker(ctx, req.workerId);
      }
      return { workerId: req.workerId };
    },

    leave: async (req) => {
      const worker = await workerOf(ctx, req.workerId);
      if (!worker) throw notJoinedError(req.workerId);
      if (worker.value === 'Lost') throw goneError(req.workerId, worker.value);
      if (worker.value !== 'Left') {
        await writer.write({
          subject: n.subjects.worker(req.workerId),
          type: 'WorkerLeft',
          data: {},
          id: `leave.${req.workerId}`,
        });
      }
      await ctx.registry.remove(req.workerId);
      return { workerId: req.workerId };
    },

    exited: async (req) => {
      const worker = await workerOf(ctx, req.workerId);
      if (!worker) throw notJoinedError(req.workerId);
      if (worker.value === 'Active' || worker.value === 'Draining') {
        // The last pulse by the server's clock, read before the key goes.
        const entry = await ctx.registry.kv.get(req.workerId);
        const lastPulseAt = entry?.operation === 'PUT' ? entry.created.toISOString() : null;
        await writer.write({
          subject: n.subjects.worker(req.workerId),
          type: 'WorkerLost',
          data: { reason: 'exited', lastPulseAt },
          id: `exited.${req.workerId}`,
        });
      }
      // A worker that left before its process ended is no loss: only the key goes.
      await ctx.registry.remove(req.workerId);
      return { workerId: req.workerId };
    },
  };
}

/**
 * A worker starts only tasks dispatched to a tag it joined with. Its credential may pull
 * from every tag's consumer (NATS permissions cannot follow each worker's tags), so this is
 * where a worker that took another tag's message is stopped from running it.
 */
function servesTag(a: ResolvedAttempt, worker: WorkerSnapshot): void {
  const tag = a.task.context.tag;
  if (tag === null || worker.context.tags.includes(tag)) return;
  throw new SonarError(
    ErrorCode.Forbidden,
    `${a.subject}: dispatched to tag ${tag}, which worker ${worker.context.workerId} did not join with`,
    { tag, workerId: worker.context.workerId },
  );
}

/** What a join declares; a second join with the same id must declare the same. */
function joinedData(w: {
  host: string;
  instanceId?: string | null | undefined;
  tags: string[];
  slots: number;
}) {
  return { host: w.host, instanceId: w.instanceId ?? null, tags: w.tags, slots: w.slots };
}

function conflictingJoin(workerId: string): SonarError {
  return new SonarError(
    ErrorCode.Conflict,
    `worker ${workerId} already joined with other host, tags or slots: a worker id is used by one process only`,
    { workerId },
  );
}
