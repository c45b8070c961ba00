import { z } from 'zod';
import type { Stored } from '../task/task.events.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);

/** Data schemas of the worker and system events (DESIGN.md section 3). */
export const workerEventData = {
  WorkerJoined: z.object({
    workerId: id,
    host: z.string(),
    instanceId: z.string().optional(),
    tags: z.array(id).min(1),
    slots: z.number().int().min(1),
  }),
  WorkerDraining: z.object({
    reason: z.enum(['spot-interruption', 'shutdown']),
    deadline: z.string().optional(),
  }),
  WorkerLeft: z.object({}),
  WorkerLost: z.object({
    lastPulseAt: z.string().nullable().optional(),
    // `revoked`: an operator revoked its credential (`sonar revoke`); like `exited`, its
    // tasks are recovered at once, with nothing left to wait for.
    reason: z.enum(['expired', 'exited', 'revoked']),
  }),
} as const;

export const systemEventData = {
  ReconcilerElected: z.object({
    nodeId: z.string().min(1),
    /** What its planner honors (reconciler/honors.ts); absent from an older leader's. */
    honors: z.array(z.string()).optional(),
    /**
     * The per-tag rate limits its planner enforces, as `SONAR_TAG_RATES` is written
     * (reconciler/tag-rates.ts, formatTagRates); absent when it has none, and from an older
     * leader's. `sonar plan` takes them when not told otherwise.
     */
    tagRates: z.string().optional(),
  }),
} as const;

type Data = { [K in keyof typeof workerEventData]: z.output<(typeof workerEventData)[K]> };

export type WorkerJoined = Stored<'WorkerJoined', Data['WorkerJoined']>;
export type WorkerDraining = Stored<'WorkerDraining', Data['WorkerDraining']>;
export type WorkerLeft = Stored<'WorkerLeft', Data['WorkerLeft']>;
export type WorkerLost = Stored<'WorkerLost', Data['WorkerLost']>;
export type WorkerEvent = WorkerJoined | WorkerDraining | WorkerLeft | WorkerLost;

export type ReconcilerElected = Stored<
  'ReconcilerElected',
  z.output<(typeof systemEventData)['ReconcilerElected']>
>;
export type SystemEvent = ReconcilerElected;
