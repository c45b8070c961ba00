import { isNoMessage } from '../../../streams/errors.js';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { ErrorCode, IllegalTransitionError, SonarError } from '../../../actors/errors.js';
import type { Aggregate, TaskSnapshot } from '../../../actors/projection.js';
import { FAILED_TASK_STATES } from '../../../actors/task/task.machine.js';
import type { Names } from '../../../streams/names.js';
import { enqueueFinalization } from '../../../streams/queues.js';
import type { FinalizeJob } from '../../../streams/queues.js';
import type { EventWriter } from '../projection/index.js';
import type { FailureLog, FinalizeFailure } from './failure-log.js';
import type { PoisonRecord } from './poisoner.js';
import type { ProjectionLoop } from '../projection/index.js';

/** One poisoned task, as `sonar poisoned list` prints it. */
export interface PoisonedTask {
  task: string;
  runId: string;
  stepId: string;
  taskId: string;
  attemptId: string;
  /** Operator retries so far (the `n` of the next job's msg id after a retry). */
  round: number;
  error: string | null;
  outputRef: string | null;
  outputBytes: number | null;
}

/** `sonar poisoned show`: the task, its error history, and its last poison record. */
export interface PoisonedDetail extends PoisonedTask {
  state: string;
  /** Every failed finalization of this attempt, every round, oldest first. */
  errors: FinalizeFailure[];
  /** The last message of `SONAR_POISON` for the task, when there is one. */
  poison: PoisonRecord | null;
}

export interface RetryOutcome {
  task: string;
  attemptId: string;
  round: number;
  /** The step's state after the retry (`Ready` when it was Blocked). */
  step: string | null;
}

export interface CancelOutcome {
  task: string;
  /** The step's state after the cancel (`Failed` when it was Blocked). */
  step: string | null;
}

/** The task is unknown, or not in the state the operation needs. */
export class NotPoisonedError extends SonarError {
  override readonly name = 'NotPoisonedError';
  constructor(
    readonly task: string,
    readonly state: string | null,
  ) {
    super(
      state === null ? ErrorCode.NotFound : ErrorCode.IllegalTransition,
      state === null ? `no task ${task}` : `task ${task} is ${state}, not Poisoned`,
      { task, state },
    );
  }
}

/**
 * The operator's side of poison (DESIGN.md sections 3 and 8): list and inspect Poisoned tasks,
 * retry one (`TaskFinalizeRetried`, a new job, a Blocked step back to Ready) or cancel one
 * (`TaskCancelled`; a Blocked step then fails). Writes go through an EventWriter, so each is
 * judged by the machines and appended with optimistic concurrency, like any backend write.
 */
export class PoisonedAdmin {
  constructor(
    private readonly deps: {
      names: Names;
      js: JetStreamClient;
      jsm: JetStreamManager;
      loop: ProjectionLoop;
      writer: EventWriter;
      failures: FailureLog;
    },
  ) {}

  /** Poisoned tasks, in task key order; only one run's with `runId`. */
  list(runId?: string): PoisonedTask[] {
    const { projection } = this.deps.loop;
    return [...projection.tasksByState.Poisoned]
      .filter((key) => runId === undefined || key.startsWith(`${runId}.`))
      .sort()
      .map((key) => summary(key, projection.tasks.get(key)!));
  }

  async show(task: string): Promise<PoisonedDetail> {
    const entry = this.task(task);
    const ctx = entry.snapshot.context;
    const { runId, taskId } = ctx.spec;
    const errors =
      ctx.attemptId === null ? [] : await this.deps.failures.history(runId, taskId, ctx.attemptId);
    return {
      ...summary(task, entry),
      state: entry.snapshot.value,
      errors,
      poison: await this.lastPoison(runId, taskId),
    };
  }

  async retry(task: string, by: string): Promise<RetryOutcome> {
    const { names, writer, loop, js } = this.deps;
    const entry = this.poisoned(task);
    const { spec, attemptId, output } = entry.snapshot.context;
    await writer.write({
      subject: names.subjects.task(spec.runId, spec.taskId),
      type: 'TaskFinalizeRetried',
      data: { attemptId, by },
    });
    // The machine counted the retry: the new job's msg id takes the new round, so the dedupe
    // window never swallows it. A crash before this enqueue leaves a Finalizing task with no
    // job, which the reconciler re-enqueues.
    const after = loop.projection.tasks.get(task)!.snapshot.context;
    const job: FinalizeJob = {
      runId: spec.runId,
      taskId: spec.taskId,
      attemptId: attemptId!,
      outputRef: output?.ref ?? 'inline',
      ...(output?.inline ? { outputInline: output.inline } : {}),
    };
    const runTrace = loop.projection.runs.get(spec.runId)?.snapshot.context.traceparent;
    await enqueueFinalization(js, names, job, after.finalizeRound, undefined, runTrace);
    const step = await this.moveStep(spec.runId, spec.stepId, 'Blocked', 'StepReady', {});
    return { task, attemptId: attemptId!, round: after.finalizeRound, step };
  }

  async cancel(task: string, reason: string): Promise<CancelOutcome> {
    const { names, writer, loop } = this.deps;
    const { spec } = this.poisoned(task).snapshot.context;
    await writer.write({
      subject: names.subjects.task(spec.runId, spec.taskId),
      type: 'TaskCancelled',
      data: { reason },
    });
    // A Blocked step had every task settled; with this one Cancelled it can only fail
    // (DESIGN.md section 3), so the step fails here at once. A step that still has open tasks
    // is left to the reconciler, which fails it once they settle.
    const stepKey = `${spec.runId}.${spec.stepId}`;
    const failed = (loop.projection.stepTasks.get(stepKey) ?? []).filter((key) => {
      const state = loop.projection.tasks.get(key)?.snapshot.value;
      return state !== undefined && FAILED_TASK_STATES.has(state);
    });
    const step = await this.moveStep(spec.runId, spec.stepId, 'Blocked', 'StepFailed', {
      reason: `task ${spec.taskId} cancelled while poisoned`,
      taskIds: failed.map((key) => key.slice(spec.runId.length + 1)),
    });
    return { task, step };
  }

  private task(task: string): Aggregate<TaskSnapshot> {
    const entry = this.deps.loop.projection.tasks.get(task);
    if (!entry) throw new NotPoisonedError(task, null);
    return entry;
  }

  private poisoned(task: string): Aggregate<TaskSnapshot> {
    const entry = this.task(task);
    if (entry.snapshot.value !== 'Poisoned') throw new NotPoisonedError(task, entry.snapshot.value);
    return entry;
  }

  /** Appends a step event only when the step is in `from`; returns the step's state after. */
  private async moveStep(
    runId: string,
    stepId: string,
    from: string,
    type: 'StepReady' | 'StepFailed',
    data: unknown,
  ): Promise<string | null> {
    const { names, writer, loop } = this.deps;
    const key = `${runId}.${stepId}`;
    if (loop.projection.steps.get(key)?.snapshot.value === from) {
      try {
        await writer.write({ subject: names.subjects.step(runId, stepId), type, data });
      } catch (err: unknown) {
        // The reconciler moved the step first: its move stands.
        if (!(err instanceof IllegalTransitionError)) throw err;
      }
    }
    return loop.projection.steps.get(key)?.snapshot.value ?? null;
  }

  private async lastPoison(runId: string, taskId: string): Promise<PoisonRecord | null> {
    const { jsm, names } = this.deps;
    try {
      const m = await jsm.streams.getMessage(names.streams.poison, {
        last_by_subj: names.subjects.poison(runId, taskId),
      });
      return m ? m.json<PoisonRecord>() : null;
    } catch (err: unknown) {
      if (isNoMessage(err)) return null;
      throw err;
    }
  }
}

function summary(key: string, entry: Aggregate<TaskSnapshot>): PoisonedTask {
  const ctx = entry.snapshot.context;
  return {
    task: key,
    runId: ctx.spec.runId,
    stepId: ctx.spec.stepId,
    taskId: ctx.spec.taskId,
    attemptId: ctx.attemptId ?? '',
    round: ctx.finalizeRound,
    error: ctx.error,
    outputRef: ctx.output?.ref ?? null,
    outputBytes: ctx.output?.bytes ?? null,
  };
}
