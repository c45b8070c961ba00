import { z } from 'zod';
import type { Stored } from '../task/task.events.js';
import { TASK_STATES } from '../task/task.machine.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);
const iso = z.string().min(1);
const count = z.number().int().min(0);
const taskState = z.enum(TASK_STATES);

/**
 * Data schemas of the retention events: the full sweep appends them once a run or a worker
 * has been finished for longer than SONAR_RETENTION, and every fold then forgets it.
 *
 * `RunExpired` carries the run's compact summary itself, so that a fold which never saw the
 * run (its events were purged before this event was appended, and the snapshot that held
 * them is gone) still ends with the same summary as one that evicted the run.
 */
export const retentionEventData = {
  RunExpired: z.object({
    runId: id,
    state: z.enum(['Succeeded', 'Failed', 'Cancelled']),
    reason: z.string().nullable().default(null),
    submittedAt: iso,
    endedAt: iso,
    taskCount: count,
    /** The run's tasks by final state; zero counts left out. */
    tasks: z.partialRecord(taskState, count),
  }),
  WorkerExpired: z.object({}),
} as const;

/** The aggregate kind of each retention event: the subject it is appended to. */
export const retentionEventKinds = { RunExpired: 'run', WorkerExpired: 'worker' } as const;

type Data = { [K in keyof typeof retentionEventData]: z.output<(typeof retentionEventData)[K]> };

export type RunExpired = Stored<'RunExpired', Data['RunExpired']>;
export type WorkerExpired = Stored<'WorkerExpired', Data['WorkerExpired']>;
export type RetentionEvent = RunExpired | WorkerExpired;
