import { assign, setup } from 'xstate';
import type { RunEvent, RunSubmitted } from './run.events.js';

export interface RunContext {
  runId: string;
  stepIds: string[];
  taskCount: number;
  submittedAt: string;
  endedAt: string | null;
  reason: string | null;
  /** The run's trace context (`RunSubmitted.traceparent`); present only when it was traced. */
  traceparent?: string;
}

export type RunState = 'Running' | 'Succeeded' | 'Failed' | 'Cancelled';

/** States from which a run never moves again. */
export const TERMINAL_RUN_STATES: ReadonlySet<string> = new Set([
  'Succeeded',
  'Failed',
  'Cancelled',
]);

export const isTerminalRunState = (state: string): boolean => TERMINAL_RUN_STATES.has(state);

/**
 * Run lifecycle (DESIGN.md section 3): `RunSubmitted` is appended last by submit, so a run
 * exists (and is dispatched) only once whole. Running, then Succeeded, Failed or Cancelled.
 */
export const runMachine = setup({
  types: { context: {} as RunContext, events: {} as RunEvent, input: {} as RunSubmitted },
  actions: {
    end: assign(({ event }) => ({
      endedAt: event.time,
      reason: 'reason' in event.data ? event.data.reason : null,
    })),
  },
}).createMachine({
  id: 'run',
  context: ({ input }) => ({
    runId: input.data.runId,
    stepIds: input.data.stepIds,
    taskCount: input.data.taskCount,
    submittedAt: input.time,
    endedAt: null,
    reason: null,
    ...(input.data.traceparent !== undefined && { traceparent: input.data.traceparent }),
  }),
  initial: 'Running',
  states: {
    Running: {
      on: {
        RunSucceeded: { target: 'Succeeded', actions: 'end' },
        RunFailed: { target: 'Failed', actions: 'end' },
        RunCancelled: { target: 'Cancelled', actions: 'end' },
      },
    },
    Succeeded: { type: 'final' },
    Failed: { type: 'final' },
    Cancelled: { type: 'final' },
  },
});

export type RunMachine = typeof runMachine;
