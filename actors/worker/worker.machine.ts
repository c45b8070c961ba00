import { assign, setup } from 'xstate';
import type { WorkerEvent, WorkerJoined, WorkerLost } from './worker.events.js';

export interface WorkerContext {
  workerId: string;
  host: string;
  instanceId: string | null;
  tags: string[];
  slots: number;
  joinedAt: string;
  drainReason: 'spot-interruption' | 'shutdown' | null;
  deadline: string | null;
  lostReason: 'expired' | 'exited' | 'revoked' | null;
  endedAt: string | null;
}

export type WorkerState = 'Active' | 'Draining' | 'Left' | 'Lost';

/**
 * Worker lifecycle (DESIGN.md section 3): Active, Draining (SIGTERM or a spot notice), then
 * Left (it said goodbye) or Lost (its registry key vanished, or its supervisor saw it exit).
 * A workerId is used once: Left and Lost are final, and a comeback is refused.
 */
export const workerMachine = setup({
  types: { context: {} as WorkerContext, events: {} as WorkerEvent, input: {} as WorkerJoined },
  actions: {
    lose: assign(({ event }) => ({
      lostReason: (event as WorkerLost).data.reason,
      endedAt: event.time,
    })),
    leave: assign(({ event }) => ({ endedAt: event.time })),
  },
}).createMachine({
  id: 'worker',
  context: ({ input }) => ({
    workerId: input.data.workerId,
    host: input.data.host,
    instanceId: input.data.instanceId ?? null,
    tags: input.data.tags,
    slots: input.data.slots,
    joinedAt: input.time,
    drainReason: null,
    deadline: null,
    lostReason: null,
    endedAt: null,
  }),
  initial: 'Active',
  states: {
    Active: {
      on: {
        WorkerDraining: {
          target: 'Draining',
          actions: assign(({ event }) => ({
            drainReason: event.data.reason,
            deadline: event.data.deadline ?? null,
          })),
        },
        WorkerLeft: { target: 'Left', actions: 'leave' },
        WorkerLost: { target: 'Lost', actions: 'lose' },
      },
    },
    Draining: {
      on: {
        WorkerLeft: { target: 'Left', actions: 'leave' },
        WorkerLost: { target: 'Lost', actions: 'lose' },
      },
    },
    Left: { type: 'final' },
    Lost: { type: 'final' },
  },
});

export type WorkerMachine = typeof workerMachine;
