/**
 * The schedule verbs of the API (`<prefix>.api.schedule.*`), as zod schemas: operator verbs,
 * served by any backend, which judges and appends; the CLI never writes an event itself.
 * Spread into `requestSchemas` (src/protocol.ts).
 *
 * @module
 */
import { z } from 'zod';
import {
  CATCH_UP_POLICIES,
  MAX_CATCH_UP_LIMIT,
  OVERLAP_POLICIES,
  SCHEDULE_NAME_RE,
} from '../../actors/schedule/schedule.events.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match ^[A-Za-z0-9_-]{1,64}$');
const name = z.string().regex(SCHEDULE_NAME_RE, `must match ${String(SCHEDULE_NAME_RE)}`);
const by = z.string().max(256).optional();

export const ScheduleVerb = {
  Create: 'schedule.create',
  List: 'schedule.list',
  Pause: 'schedule.pause',
  Resume: 'schedule.resume',
  Delete: 'schedule.delete',
  Trigger: 'schedule.trigger',
} as const;
export type ScheduleVerb = (typeof ScheduleVerb)[keyof typeof ScheduleVerb];

export const scheduleRequestSchemas = {
  [ScheduleVerb.Create]: z.strictObject({
    name,
    cron: z.string().min(1).max(256).optional(),
    timezone: z.string().min(1).max(64).optional(),
    everyMs: z.number().int().min(1000).optional(),
    /** A run file without `runId` (checked as one by the backend). */
    run: z.record(z.string(), z.unknown()),
    overlap: z.enum(OVERLAP_POLICIES).optional(),
    catchUp: z.enum(CATCH_UP_POLICIES).optional(),
    catchUpLimit: z.number().int().min(1).max(MAX_CATCH_UP_LIMIT).optional(),
    missedAfterMs: z.number().int().min(1000).optional(),
    by,
  }),
  [ScheduleVerb.List]: z.strictObject({ name: name.optional() }),
  [ScheduleVerb.Pause]: z.strictObject({ name, by }),
  [ScheduleVerb.Resume]: z.strictObject({ name, by }),
  [ScheduleVerb.Delete]: z.strictObject({ name, by }),
  // `requestId` makes a retried trigger (a lost answer) fire once: it names the event.
  [ScheduleVerb.Trigger]: z.strictObject({ name, requestId: id.optional(), by }),
} as const;
