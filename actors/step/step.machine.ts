import { assign, setup } from 'xstate';
import { resolveNotBefore } from '../not-before.js';
import { DEFAULT_PRIORITY } from '../priority.js';
import type { StepRetry } from '../task/retry-policy.js';
import type { StepCreated, StepEvent, StepFailed } from './step.events.js';

export interface StepContext {
  runId: string;
  stepId: string;
  tags: string[];
  maxConcurrent: number | null;
  after: string[];
  taskCount: number;
  output: 'json' | 'bytes';
  timeoutMs: number | null;
  /** Its tasks' priority, unless a task has its own. */
  priority: number;
  /** No task of the step is placed before this time (resolved from `notBefore` or `delayMs`). */
  notBefore: string | null;
  /** Null: DEFAULT_RETRY_POLICY, and DEFAULT_MAX_ATTEMPTS for tasks without their own. */
  retry: StepRetry | null;
  /** Ready with Pending tasks and no eligible worker for any of their tags. */
  starved: boolean;
  /** Tasks named by the last StepBlocked or StepFailed. */
  taskIds: string[];
  reason: string | null;
}

export type StepState = 'Waiting' | 'Ready' | 'Blocked' | 'Succeeded' | 'Failed' | 'Skipped';

/** States a step can still leave: it has not succeeded, failed or been skipped. */
export const UNFINISHED_STEP_STATES: ReadonlySet<string> = new Set(['Waiting', 'Ready', 'Blocked']);

export function initialStepContext(created: StepCreated): StepContext {
  const d = created.data;
  return {
    runId: d.runId,
    stepId: d.stepId,
    tags: d.tags,
    maxConcurrent: d.maxConcurrent ?? null,
    after: d.after,
    taskCount: d.taskCount,
    output: d.output,
    timeoutMs: d.timeoutMs ?? null,
    priority: d.priority ?? DEFAULT_PRIORITY,
    notBefore: resolveNotBefore(d, created.time),
    retry: d.retry ?? null,
    starved: false,
    taskIds: [],
    reason: null,
  };
}

/**
 * Step lifecycle (DESIGN.md section 3): Waiting while an `after` step is unfinished, Ready,
 * Blocked (every task settled, some Poisoned, none Failed/Dead/Cancelled), then Succeeded,
 * Failed or Skipped. `StepStarved`/`StepServed` toggle the `starved` flag and are accepted
 * only when they change it, so the backend appends one per change, never one per tick.
 * Steps change only through their own events: the backend decides when outcomes call for them.
 */
export const stepMachine = setup({
  types: { context: {} as StepContext, events: {} as StepEvent, input: {} as StepCreated },
  guards: {
    isStarved: ({ context }) => context.starved,
    isServed: ({ context }) => !context.starved,
  },
  actions: {
    serve: assign({ starved: false }),
    fail: assign(({ event }) => {
      const e = event as StepFailed;
      return { reason: e.data.reason, taskIds: e.data.taskIds, starved: false };
    }),
    skip: assign(({ event }) => ({
      reason: (event as Extract<StepEvent, { type: 'StepSkipped' }>).data.reason,
      starved: false,
    })),
  },
}).createMachine({
  id: 'step',
  context: ({ input }) => initialStepContext(input),
  initial: 'Created',
  states: {
    // Transient: StepCreated decides Waiting or Ready at once.
    Created: {
      always: [
        { guard: ({ context }) => context.after.length === 0, target: 'Ready' },
        { target: 'Waiting' },
      ],
    },
    Waiting: {
      on: {
        StepReady: 'Ready',
        StepSkipped: { target: 'Skipped', actions: 'skip' },
      },
    },
    Ready: {
      on: {
        StepStarved: {
          guard: 'isServed',
          actions: assign({ starved: true }),
        },
        StepServed: { guard: 'isStarved', actions: 'serve' },
        StepBlocked: {
          target: 'Blocked',
          actions: assign(({ event }) => ({
            taskIds: event.data.taskIds,
            starved: false,
          })),
        },
        StepSucceeded: { target: 'Succeeded', actions: 'serve' },
        StepFailed: { target: 'Failed', actions: 'fail' },
        StepSkipped: { target: 'Skipped', actions: 'skip' },
      },
    },
    Blocked: {
      on: {
        StepReady: { target: 'Ready', actions: assign({ taskIds: [] }) },
        StepFailed: { target: 'Failed', actions: 'fail' },
        StepSkipped: { target: 'Skipped', actions: 'skip' },
      },
    },
    Succeeded: { type: 'final' },
    Failed: { type: 'final' },
    Skipped: { type: 'final' },
  },
});

export type StepMachine = typeof stepMachine;
