import { z } from 'zod';
import { PRIORITY_MAX, PRIORITY_MIN } from '../priority.js';
import { parsableTime } from '../task/task.events.js';
import type { Stored } from '../task/task.events.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);

/** Data schemas of the step events (DESIGN.md section 3). */
export const stepEventData = {
  StepCreated: z.object({
    runId: id,
    stepId: id,
    tags: z.array(id).min(1),
    maxConcurrent: z.number().int().min(1).optional(),
    after: z.array(id).default([]),
    taskCount: z.number().int().min(0),
    output: z.enum(['json', 'bytes']).default('bytes'),
    timeoutMs: z.number().int().min(1).optional(),
    /** Its tasks' priority, unless a task has its own. Absent: DEFAULT_PRIORITY. */
    priority: z.number().int().min(PRIORITY_MIN).max(PRIORITY_MAX).optional(),
    /** No task of the step is placed before this time, or `delayMs` after this event's time. */
    notBefore: parsableTime.optional(),
    delayMs: z.number().int().min(0).optional(),
    /** The backoff after a retryable failure (task/retry-policy.ts). Absent: the default. */
    retry: z
      .object({
        maxAttempts: z.number().int().min(1),
        backoff: z.enum(['fixed', 'exponential']),
        initialMs: z.number().int().min(0),
        maxMs: z.number().int().min(0),
        jitter: z.number().min(0).max(1),
      })
      .optional(),
  }),
  StepReady: z.object({}),
  StepStarved: z.object({ tags: z.array(id) }),
  StepServed: z.object({}),
  StepBlocked: z.object({ taskIds: z.array(id) }),
  StepSucceeded: z.object({}),
  StepFailed: z.object({ reason: z.string(), taskIds: z.array(id).default([]) }),
  StepSkipped: z.object({ reason: z.string() }),
} as const;

type Data = { [K in keyof typeof stepEventData]: z.output<(typeof stepEventData)[K]> };

export type StepCreated = Stored<'StepCreated', Data['StepCreated']>;
export type StepReady = Stored<'StepReady', Data['StepReady']>;
export type StepStarved = Stored<'StepStarved', Data['StepStarved']>;
export type StepServed = Stored<'StepServed', Data['StepServed']>;
export type StepBlocked = Stored<'StepBlocked', Data['StepBlocked']>;
export type StepSucceeded = Stored<'StepSucceeded', Data['StepSucceeded']>;
export type StepFailed = Stored<'StepFailed', Data['StepFailed']>;
export type StepSkipped = Stored<'StepSkipped', Data['StepSkipped']>;

export type StepEvent =
  | StepCreated
  | StepReady
  | StepStarved
  | StepServed
  | StepBlocked
  | StepSucceeded
  | StepFailed
  | StepSkipped;
