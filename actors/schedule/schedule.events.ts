import { z } from 'zod';
import type { Stored } from '../task/task.events.js';

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);
const iso = z.string().min(1);

/**
 * A schedule's name: an id short enough that `<name>-<compact time>-manual` (the longest run
 * id a schedule makes, schedule-run-ids.ts) stays within the 64 characters of a run id.
 */
export const SCHEDULE_NAME_RE = /^[A-Za-z0-9_-]{1,40}$/;

/** What a schedule does when a due time comes while its last run is still going. */
export const OVERLAP_POLICIES = ['skip', 'allow'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

/** What a schedule does with the due times it missed (a fleet that was down). */
export const CATCH_UP_POLICIES = ['none', 'last', 'all'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];

/** Why a due time was handled: its time came, it was missed and caught up, or an operator asked. */
export const FIRE_TRIGGERS = ['due', 'catch-up', 'manual'] as const;
export type FireTrigger = (typeof FIRE_TRIGGERS)[number];

/** Why a handled due time submitted no run. */
export const FIRE_SKIPS = ['overlap', 'catch-up'] as const;
export type FireSkip = (typeof FIRE_SKIPS)[number];

/** At most this many missed due times are run by catch-up `all`. */
export const MAX_CATCH_UP_LIMIT = 100;

/**
 * The longest `missedAfterMs` a new schedule may have. Past it a fleet that was down
 * would fire every due time of the downtime as if on time, bypassing the catch-up policy.
 * A schedule stored with a larger value (before the bound) is read with this one.
 */
export const MAX_MISSED_AFTER_MS = 86_400_000;

/**
 * Error codes of a submit that no retry changes (the template or the run id is refused): the
 * fire's run is given up with a `ScheduleRunRefused`.
 */
export const PERMANENT_REFUSALS = ['validation', 'conflict', 'illegal_transition'] as const;
export type PermanentRefusal = (typeof PERMANENT_REFUSALS)[number];

/**
 * The run a schedule submits at each due time: a run file without its `runId`, which each
 * fire sets. Checked against the run-file schema by the backend when the schedule is
 * created (src/schedules/); here only its outline, so that a fold never depends on src/.
 */
const runTemplate = z.object({ steps: z.array(z.record(z.string(), z.unknown())).min(1) });

/** Data schemas of the schedule events, appended on `<prefix>.events.schedule.<name>`. */
export const scheduleEventData = {
  ScheduleCreated: z
    .object({
      name: z.string().regex(SCHEDULE_NAME_RE),
      /** A cron expression (5 fields, or 6 with seconds first), read in `timezone`. */
      cron: z.string().min(1).max(256).optional(),
      /** An IANA time zone name, for `cron` only. */
      timezone: z.string().min(1).max(64).optional(),
      /** An interval: due times are the multiples of it since the Unix epoch. */
      everyMs: z.number().int().min(1000).multipleOf(1000).optional(),
      run: runTemplate,
      overlap: z.enum(OVERLAP_POLICIES).default('skip'),
      catchUp: z.enum(CATCH_UP_POLICIES).default('last'),
      catchUpLimit: z.number().int().min(1).max(MAX_CATCH_UP_LIMIT).default(10),
      /**
       * A due time seen later than this after it came is missed (catch-up decides). Not
       * bounded here, so that a schedule stored before {@link MAX_MISSED_AFTER_MS} still folds:
       * the firer reads it clamped.
       */
      missedAfterMs: z.number().int().min(1000).default(60_000),
    })
    .refine((d) => (d.cron === undefined) !== (d.everyMs === undefined), {
      message: 'needs exactly one of cron and everyMs',
    })
    .refine((d) => d.timezone === undefined || d.cron !== undefined, {
      message: 'timezone goes with cron only',
    }),
  ScheduleFired: z.object({
    /** The due time handled (for `manual`, the time of the request, in whole seconds). */
    dueAt: iso,
    /** The run this due time owns; submitted unless `skipped`. */
    runId: id,
    trigger: z.enum(FIRE_TRIGGERS),
    skipped: z.enum(FIRE_SKIPS).optional(),
    /** Due times before `dueAt` that this event passes over with no run (catch-up). */
    missed: z.number().int().min(0).default(0),
  }),
  /**
   * A fired run that the backend refused for good (`code` one of {@link PERMANENT_REFUSALS}):
   * it is not submitted again, and no longer counts as going for `overlap: skip`.
   */
  ScheduleRunRefused: z.object({
    runId: id,
    code: z.enum(PERMANENT_REFUSALS),
    message: z.string().max(1024),
  }),
  SchedulePaused: z.object({ by: z.string().max(256).optional() }),
  ScheduleResumed: z.object({ by: z.string().max(256).optional() }),
  ScheduleDeleted: z.object({ by: z.string().max(256).optional() }),
} as const;

type Data = { [K in keyof typeof scheduleEventData]: z.output<(typeof scheduleEventData)[K]> };

export type ScheduleCreated = Stored<'ScheduleCreated', Data['ScheduleCreated']>;
export type ScheduleFired = Stored<'ScheduleFired', Data['ScheduleFired']>;
export type ScheduleRunRefused = Stored<'ScheduleRunRefused', Data['ScheduleRunRefused']>;
export type SchedulePaused = Stored<'SchedulePaused', Data['SchedulePaused']>;
export type ScheduleResumed = Stored<'ScheduleResumed', Data['ScheduleResumed']>;
export type ScheduleDeleted = Stored<'ScheduleDeleted', Data['ScheduleDeleted']>;

export type ScheduleEvent =
  | ScheduleCreated
  | ScheduleFired
  | ScheduleRunRefused
  | SchedulePaused
  | ScheduleResumed
  | ScheduleDeleted;

export type RunTemplate = Data['ScheduleCreated']['run'];
