import { z } from 'zod';
import type { Stored } from '../task/task.events.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);

/** Data schemas of the run events (DESIGN.md section 3). */
export const runEventData = {
  RunSubmitted: z.object({
    runId: id,
    stepIds: z.array(id),
    taskCount: z.number().int().min(0),
    /**
     * The W3C `traceparent` of the span that committed the run (docs/tracing.md): the trace
     * its dispatches, attempts and finalizations join. Absent when nothing traced the
     * submit. Only carried, never judged: a value that is not a short string is dropped, not
     * a reason to skip the event.
     */
    traceparent: z.string().max(256).optional().catch(undefined),
  }),
  RunSucceeded: z.object({}),
  RunFailed: z.object({ reason: z.string() }),
  RunCancelled: z.object({ reason: z.string() }),
} as const;

type Data = { [K in keyof typeof runEventData]: z.output<(typeof runEventData)[K]> };

export type RunSubmitted = Stored<'RunSubmitted', Data['RunSubmitted']>;
export type RunSucceeded = Stored<'RunSucceeded', Data['RunSucceeded']>;
export type RunFailed = Stored<'RunFailed', Data['RunFailed']>;
export type RunCancelled = Stored<'RunCancelled', Data['RunCancelled']>;

export type RunEvent = RunSubmitted | RunSucceeded | RunFailed | RunCancelled;
