import { z } from 'zod';
import { PRIORITY_MAX, PRIORITY_MIN } from '../priority.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);
const iso = z.string().min(1);
/** A time the fold computes with: a string Date.parse cannot read is refused, not NaN. */
export const parsableTime = iso.refine((s) => !Number.isNaN(Date.parse(s)), 'is not a time');

/** Data schemas of the task events (DESIGN.md section 3), keyed by event type. */
export const taskEventData = {
  TaskCreated: z.object({
    runId: id,
    stepId: id,
    taskId: id,
    tags: z.array(id).min(1),
    command: z.array(z.string()).min(1).optional(),
    input: z.unknown().optional(),
    maxAttempts: z.number().int().min(1).default(3),
    /** Its own priority; absent: its step's. */
    priority: z.number().int().min(PRIORITY_MIN).max(PRIORITY_MAX).optional(),
    /** Not placed before this time, or before `delayMs` after this event's time. */
    notBefore: parsableTime.optional(),
    delayMs: z.number().int().min(0).optional(),
  }),
  TaskPublished: z.object({
    attempt: z.number().int().min(1),
    attemptId: id,
    tokenHash: z.string().regex(/^[0-9a-f]{64}$/),
    tag: id,
  }),
  TaskStarted: z.object({ attemptId: id, workerId: id }),
  TaskRequeued: z.object({
    attemptId: id,
    reason: z.enum(['publish-timeout', 'worker-lost', 'worker-released', 'operator']),
    recoveries: z.number().int().min(0).default(0),
  }),
  TaskAttemptFailed: z.object({
    attemptId: id,
    workerId: id,
    exitCode: z.number().int(),
    error: z.string(),
    retryable: z.boolean().default(true),
    retryAt: iso.optional(),
  }),
  TaskResultAccepted: z.object({
    attemptId: id,
    workerId: id,
    outputRef: z.string().min(1),
    outputBytes: z.number().int().min(0),
    outputInline: z.string().optional(),
  }),
  TaskFinalized: z.object({ attemptId: id, resultKey: z.string().min(1) }),
  TaskPoisoned: z.object({ attemptId: id, error: z.string(), deliveries: z.number().int().min(0) }),
  TaskFinalizeRetried: z.object({ attemptId: id, by: z.string().min(1) }),
  TaskDead: z.object({ reason: z.literal('recovery-limit'), recoveries: z.number().int().min(0) }),
  TaskCancelled: z.object({ reason: z.string() }),
} as const;

type Data = { [K in keyof typeof taskEventData]: z.output<(typeof taskEventData)[K]> };

/** A stored event as a machine sees it: the payload plus the server's timestamp. */
export interface Stored<T extends string, D> {
  type: T;
  data: D;
  /** ISO-8601 server time of the JetStream message. */
  time: string;
}

export type TaskCreated = Stored<'TaskCreated', Data['TaskCreated']>;
export type TaskPublished = Stored<'TaskPublished', Data['TaskPublished']>;
export type TaskStarted = Stored<'TaskStarted', Data['TaskStarted']>;
export type TaskRequeued = Stored<'TaskRequeued', Data['TaskRequeued']>;
export type TaskAttemptFailed = Stored<'TaskAttemptFailed', Data['TaskAttemptFailed']>;
export type TaskResultAccepted = Stored<'TaskResultAccepted', Data['TaskResultAccepted']>;
export type TaskFinalized = Stored<'TaskFinalized', Data['TaskFinalized']>;
export type TaskPoisoned = Stored<'TaskPoisoned', Data['TaskPoisoned']>;
export type TaskFinalizeRetried = Stored<'TaskFinalizeRetried', Data['TaskFinalizeRetried']>;
export type TaskDead = Stored<'TaskDead', Data['TaskDead']>;
export type TaskCancelled = Stored<'TaskCancelled', Data['TaskCancelled']>;

export type TaskEvent =
  | TaskCreated
  | TaskPublished
  | TaskStarted
  | TaskRequeued
  | TaskAttemptFailed
  | TaskResultAccepted
  | TaskFinalized
  | TaskPoisoned
  | TaskFinalizeRetried
  | TaskDead
  | TaskCancelled;

export type TaskEventType = TaskEvent['type'];
export type TaskEventData<T extends TaskEventType> = Extract<TaskEvent, { type: T }>['data'];
