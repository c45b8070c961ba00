import { assign, setup } from 'xstate';
import { resolveNotBefore } from '../not-before.js';
import type {
  TaskAttemptFailed,
  TaskCancelled,
  TaskCreated,
  TaskDead,
  TaskEvent,
  TaskPublished,
  TaskRequeued,
} from './task.events.js';

/** What a task is: fixed at `TaskCreated`, shared by reference across snapshots. */
export interface TaskSpec {
  runId: string;
  stepId: string;
  taskId: string;
  tags: string[];
  command?: string[] | undefined;
  input?: unknown;
  maxAttempts: number;
  /** Its own priority; undefined: its step's. */
  priority?: number | undefined;
  /** As submitted; the resolved time is the context's first `retryAt`. */
  notBefore?: string | undefined;
  delayMs?: number | undefined;
}

/** The accepted output of the current attempt. */
export interface TaskOutput {
  ref: string;
  bytes: number;
  /** Base64 output kept only while it may still be finalized (Finalizing or Poisoned). */
  inline: string | null;
}

/**
 * Everything the backend and the reconciler need to know about one task. Kept under 20 keys
 * on purpose: XState copies the context with `Object.assign` on every assign, and V8 leaves
 * its fast path above about 20 properties, and each copy becomes many times slower
 * (bench/event-store.ts; docs/benchmarks.md).
 */
export interface TaskContext {
  spec: TaskSpec;
  /** Publishes so far; never reset. */
  attempt: number;
  attemptId: string | null;
  tokenHash: string | null;
  tag: string | null;
  workerId: string | null;
  /** `TaskAttemptFailed` so far; counted against `maxAttempts`. */
  failures: number;
  /**
   * Not before this time may the task be published: its `notBefore` (or `delayMs` after its
   * creation) until its first publish, then the backoff after each retryable failure.
   */
  retryAt: string | null;
  /** Time it last entered Pending (created, requeued, or back from a retryable failure). */
  queuedAt: string | null;
  /** Counted (`worker-lost`) recoveries over the task's whole life, `TaskDead` included. */
  recoveries: number;
  /** Times of the counted recoveries, for the sliding recovery window. */
  recoveredAt: string[];
  /**
   * Time of the event that entered the current attempt state: `TaskPublished` while
   * Published, `TaskStarted` while Running, `TaskResultAccepted` while Finalizing/Poisoned.
   */
  since: string | null;
  /**
   * Time of the current attempt's `TaskStarted`: kept through Finalizing and the terminal
   * states (the results sink records it), cleared with the attempt. Absent from contexts
   * folded before it existed (an old snapshot): read it as null.
   */
  startedAt?: string | null;
  output: TaskOutput | null;
  resultKey: string | null;
  error: string | null;
  /** Operator retries of finalization: the `n` of the finalize job's msg id. */
  finalizeRound: number;
}

/** Every task state, in lifecycle order (DESIGN.md section 3): the one list of them. */
export const TASK_STATES = [
  'Pending',
  'Published',
  'Running',
  'Finalizing',
  'Succeeded',
  'Failed',
  'Dead',
  'Cancelled',
  'Poisoned',
] as const;

export type TaskState = (typeof TASK_STATES)[number];

/** States from which a task never moves again. Poisoned is held, not terminal. */
export const TERMINAL_TASK_STATES: ReadonlySet<string> = new Set([
  'Succeeded',
  'Failed',
  'Dead',
  'Cancelled',
]);

/** Terminal without a result: the task failed, died or was cancelled. */
export const FAILED_TASK_STATES: ReadonlySet<string> = new Set(['Failed', 'Dead', 'Cancelled']);

/** Settled: nothing more happens without an operator (terminal, or Poisoned). */
export const isSettledTaskState = (state: string): boolean =>
  TERMINAL_TASK_STATES.has(state) || state === 'Poisoned';

/** Settled without success: failed for good, or held Poisoned. */
export const isUnsuccessfulTaskState = (state: string): boolean =>
  FAILED_TASK_STATES.has(state) || state === 'Poisoned';

export function initialTaskContext(created: TaskCreated): TaskContext {
  const d = created.data;
  return {
    spec: {
      runId: d.runId,
      stepId: d.stepId,
      taskId: d.taskId,
      tags: d.tags,
      command: d.command,
      input: d.input,
      maxAttempts: d.maxAttempts,
      priority: d.priority,
      notBefore: d.notBefore,
      delayMs: d.delayMs,
    },
    attempt: 0,
    attemptId: null,
    tokenHash: null,
    tag: null,
    workerId: null,
    failures: 0,
    retryAt: resolveNotBefore(d, created.time),
    queuedAt: created.time,
    recoveries: 0,
    recoveredAt: [],
    since: null,
    startedAt: null,
    output: null,
    resultKey: null,
    error: null,
    finalizeRound: 0,
  };
}

/** The attempt-scoped fields cleared when a task returns to Pending. */
const backToPending = {
  attemptId: null,
  tokenHash: null,
  tag: null,
  workerId: null,
  since: null,
  startedAt: null,
  output: null,
  resultKey: null,
} as const;

const attemptIdOf = (event: TaskEvent): string | undefined =>
  'attemptId' in event.data ? event.data.attemptId : undefined;

const countsAsRecovery = (event: TaskRequeued): boolean => event.data.reason === 'worker-lost';

const isRetryableFailure = (context: TaskContext, event: TaskAttemptFailed): boolean =>
  event.data.retryable && context.failures + 1 < context.spec.maxAttempts;

/**
 * Task lifecycle (DESIGN.md section 3):
 * Pending -> Published -> Running -> Finalizing -> Succeeded; terminal Failed, Dead, Cancelled;
 * Poisoned is held until an operator retries (-> Finalizing) or cancels it.
 *
 * Inputs are stored events, never commands: the backend asks `can()` before appending, so an
 * event this machine refuses is never written. Every event carrying an attemptId is accepted
 * only for the current attempt (`isCurrentAttempt`). There are no timers: timeouts are events
 * the reconciler appends. The one named action, `enqueueFinalization`, is returned by
 * `transition()` and carried out by the backend.
 */
export const taskMachine = setup({
  types: {
    context: {} as TaskContext,
    events: {} as TaskEvent,
    input: {} as TaskCreated,
  },
  guards: {
    isCurrentAttempt: ({ context, event }) =>
      context.attemptId !== null && attemptIdOf(event) === context.attemptId,
    isNextAttempt: ({ context, event }) =>
      (event as TaskPublished).data.attempt === context.attempt + 1,
    isRetryableFailure: ({ context, event }) =>
      attemptIdOf(event) === context.attemptId &&
      isRetryableFailure(context, event as TaskAttemptFailed),
  },
  actions: {
    /** Carried out by the backend after the append: enqueue the finalization job. */
    enqueueFinalization: () => {},
    publish: assign(({ event }) => {
      const e = event as TaskPublished;
      return {
        attempt: e.data.attempt,
        attemptId: e.data.attemptId,
        tokenHash: e.data.tokenHash,
        tag: e.data.tag,
        since: e.time,
        retryAt: null,
      };
    }),
    requeue: assign(({ context, event }) => {
      const e = event as TaskRequeued;
      return countsAsRecovery(e)
        ? {
            ...backToPending,
            queuedAt: e.time,
            recoveries: context.recoveries + 1,
            recoveredAt: [...context.recoveredAt, e.time],
          }
        : { ...backToPending, queuedAt: e.time };
    }),
    die: assign(({ context, event }) => ({
      recoveries: context.recoveries + 1,
      recoveredAt: [...context.recoveredAt, event.time],
      error: `dead: ${(event as TaskDead).data.reason}`,
    })),
    failAttempt: assign(({ context, event }) => {
      const e = event as TaskAttemptFailed;
      return {
        ...backToPending,
        queuedAt: e.time,
        failures: context.failures + 1,
        retryAt: e.data.retryAt ?? null,
        error: e.data.error,
      };
    }),
    failTask: assign(({ context, event }) => {
      const e = event as TaskAttemptFailed;
      return { failures: context.failures + 1, workerId: e.data.workerId, error: e.data.error };
    }),
    cancel: assign(({ event }) => ({
      error: `cancelled: ${(event as TaskCancelled).data.reason}`,
    })),
  },
}).createMachine({
  id: 'task',
  initial: 'Pending',
  context: ({ input }) => initialTaskContext(input),
  states: {
    Pending: {
      on: {
        TaskPublished: { guard: 'isNextAttempt', target: 'Published', actions: 'publish' },
        TaskCancelled: { target: 'Cancelled', actions: 'cancel' },
      },
    },
    Published: {
      on: {
        TaskStarted: {
          guard: 'isCurrentAttempt',
          target: 'Running',
          actions: assign(({ event }) => ({
            workerId: event.data.workerId,
            since: event.time,
            startedAt: event.time,
          })),
        },
        TaskRequeued: { guard: 'isCurrentAttempt', target: 'Pending', actions: 'requeue' },
        TaskDead: { target: 'Dead', actions: 'die' },
        TaskCancelled: { target: 'Cancelled', actions: 'cancel' },
      },
    },
    Running: {
      on: {
        TaskRequeued: { guard: 'isCurrentAttempt', target: 'Pending', actions: 'requeue' },
        TaskDead: { target: 'Dead', actions: 'die' },
        TaskAttemptFailed: [
          { guard: 'isRetryableFailure', target: 'Pending', actions: 'failAttempt' },
          { guard: 'isCurrentAttempt', target: 'Failed', actions: 'failTask' },
        ],
        TaskResultAccepted: {
          guard: 'isCurrentAttempt',
          target: 'Finalizing',
          actions: [
            assign(({ event }) => ({
              workerId: event.data.workerId,
              since: event.time,
              output: {
                ref: event.data.outputRef,
                bytes: event.data.outputBytes,
                inline: event.data.outputInline ?? null,
              },
            })),
            'enqueueFinalization',
          ],
        },
        TaskCancelled: { target: 'Cancelled', actions: 'cancel' },
      },
    },
    Finalizing: {
      on: {
        TaskFinalized: {
          guard: 'isCurrentAttempt',
          target: 'Succeeded',
          actions: assign(({ context, event }) => ({
            resultKey: event.data.resultKey,
            // The inline bytes live on in the event log; a finished task need not hold them.
            output: context.output && { ...context.output, inline: null },
          })),
        },
        TaskPoisoned: {
          guard: 'isCurrentAttempt',
          target: 'Poisoned',
          actions: assign(({ event }) => ({ error: event.data.error })),
        },
        TaskCancelled: { target: 'Cancelled', actions: 'cancel' },
      },
    },
    Poisoned: {
      on: {
        TaskFinalizeRetried: {
          guard: 'isCurrentAttempt',
          target: 'Finalizing',
          actions: [
            assign(({ context }) => ({ finalizeRound: context.finalizeRound + 1, error: null })),
            'enqueueFinalization',
          ],
        },
        TaskCancelled: { target: 'Cancelled', actions: 'cancel' },
      },
    },
    Succeeded: { type: 'final' },
    Failed: { type: 'final' },
    Dead: { type: 'final' },
    Cancelled: { type: 'final' },
  },
});

export type TaskMachine = typeof taskMachine;
