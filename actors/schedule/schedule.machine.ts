import { assign, setup } from 'xstate';
import type {
  CatchUpPolicy,
  FireSkip,
  FireTrigger,
  OverlapPolicy,
  RunTemplate,
  ScheduleCreated,
  ScheduleEvent,
  ScheduleFired,
  ScheduleRunRefused,
} from './schedule.events.js';

/** One handled due time, as the schedule remembers it. */
export interface ScheduleFire {
  dueAt: string;
  runId: string;
  trigger: FireTrigger;
  skipped: FireSkip | null;
  missed: number;
  /** Server time of the `ScheduleFired` event. */
  at: string;
}

/** The fires a schedule keeps (latest last): for `list` and the dashboard. */
export const RECENT_FIRES = 10;

/**
 * The run ids a schedule keeps of the fires that submitted a run: the ones whose submit the
 * backend finishes when the log does not hold the run whole. The firer never makes a fire
 * that would push out one not yet whole (src/schedules/next-fire.ts), so none is lost.
 */
export const RUN_IDS_KEPT = 100;

/** A fired run refused for good by the submit (`ScheduleRunRefused`). */
export interface RefusedRun {
  runId: string;
  code: string;
  message: string;
  /** Server time of the `ScheduleRunRefused` event. */
  at: string;
}

export interface ScheduleContext {
  name: string;
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
  run: RunTemplate;
  overlap: OverlapPolicy;
  catchUp: CatchUpPolicy;
  catchUpLimit: number;
  missedAfterMs: number;
  createdAt: string;
  /**
   * Every due time at or before this is handled: fired, skipped, passed over by catch-up, or
   * before the schedule existed or while it was paused. A due fire must be later.
   */
  cursor: string;
  /** The last fire that submitted a run (the one `overlap: skip` waits for). */
  lastRun: ScheduleFire | null;
  recent: ScheduleFire[];
  /**
   * Run ids of the latest {@link RUN_IDS_KEPT} fires that submitted a run, oldest first, less
   * those refused for good: each one the log does not hold is owed a submit. Absent from a
   * context an older build's snapshot holds: read it with {@link runIdsOf}.
   */
  runIds: string[];
  /** `ScheduleRunRefused` events, and the latest. */
  refusedRuns: number;
  lastRefused: RefusedRun | null;
  /** `ScheduleFired` events, and how many of them submitted a run. */
  fires: number;
  runs: number;
  pausedAt: string | null;
  deletedAt: string | null;
}

export type ScheduleState = 'Active' | 'Paused' | 'Deleted';

/** A context's run ids (none in one restored from an older build's snapshot). */
export const runIdsOf = (c: Partial<Pick<ScheduleContext, 'runIds'>>): string[] => c.runIds ?? [];

const later = (a: string, b: string): string => (Date.parse(a) >= Date.parse(b) ? a : b);

/**
 * Schedule lifecycle: Active (fires at its due times), Paused (fires only when an operator
 * triggers it), Deleted (final; its name is not used again, as an expired run's id is not).
 *
 * Inputs are stored events. `ScheduleFired` is the proof that a due time was handled: the
 * machine accepts a due or catch-up fire only for a due time after its cursor, so a second
 * fire of the same time is refused even by a writer that lost no race. The due times
 * themselves are computed outside (src/schedules/), by a function of the time it is given.
 * Resuming moves the cursor to the resume's server time: due times that came while paused
 * are not run later. `ScheduleRunRefused` (Active or Paused) gives up one fired run that a
 * submit refused for good; a Deleted schedule takes no event, so the backend only logs such a
 * refusal of its runs.
 */
export const scheduleMachine = setup({
  types: {
    context: {} as ScheduleContext,
    events: {} as ScheduleEvent,
    input: {} as ScheduleCreated,
  },
  guards: {
    isAfterCursor: ({ context, event }) => {
      const { data } = event as ScheduleFired;
      return data.trigger !== 'manual' && Date.parse(data.dueAt) > Date.parse(context.cursor);
    },
    isNewManualRun: ({ context, event }) => {
      const { data } = event as ScheduleFired;
      return data.trigger === 'manual' && !context.recent.some((f) => f.runId === data.runId);
    },
    isOwedRun: ({ context, event }) =>
      runIdsOf(context).includes((event as ScheduleRunRefused).data.runId),
  },
  actions: {
    recordFire: assign(({ context, event }) => {
      const { data, time } = event as ScheduleFired;
      const fire: ScheduleFire = {
        dueAt: data.dueAt,
        runId: data.runId,
        trigger: data.trigger,
        skipped: data.skipped ?? null,
        missed: data.missed,
        at: time,
      };
      const submitted = fire.skipped === null;
      return {
        cursor: data.trigger === 'manual' ? context.cursor : later(data.dueAt, context.cursor),
        lastRun: submitted ? fire : context.lastRun,
        recent: [...context.recent, fire].slice(-RECENT_FIRES),
        runIds: submitted
          ? [...runIdsOf(context), fire.runId].slice(-RUN_IDS_KEPT)
          : runIdsOf(context),
        fires: context.fires + 1,
        runs: context.runs + (submitted ? 1 : 0),
      };
    }),
    recordRefusal: assign(({ context, event }) => {
      const { data, time } = event as ScheduleRunRefused;
      return {
        runIds: runIdsOf(context).filter((r) => r !== data.runId),
        refusedRuns: ((context as Partial<ScheduleContext>).refusedRuns ?? 0) + 1,
        lastRefused: { runId: data.runId, code: data.code, message: data.message, at: time },
      };
    }),
    remove: assign(({ event }) => ({ deletedAt: event.time })),
  },
}).createMachine({
  id: 'schedule',
  context: ({ input }) => ({
    name: input.data.name,
    cron: input.data.cron ?? null,
    timezone: input.data.cron === undefined ? null : (input.data.timezone ?? 'UTC'),
    everyMs: input.data.everyMs ?? null,
    run: input.data.run,
    overlap: input.data.overlap,
    catchUp: input.data.catchUp,
    catchUpLimit: input.data.catchUpLimit,
    missedAfterMs: input.data.missedAfterMs,
    createdAt: input.time,
    cursor: input.time,
    lastRun: null,
    recent: [],
    runIds: [],
    refusedRuns: 0,
    lastRefused: null,
    fires: 0,
    runs: 0,
    pausedAt: null,
    deletedAt: null,
  }),
  initial: 'Active',
  states: {
    Active: {
      on: {
        ScheduleFired: [
          { guard: 'isAfterCursor', actions: 'recordFire' },
          { guard: 'isNewManualRun', actions: 'recordFire' },
        ],
        ScheduleRunRefused: { guard: 'isOwedRun', actions: 'recordRefusal' },
        SchedulePaused: {
          target: 'Paused',
          actions: assign(({ event }) => ({ pausedAt: event.time })),
        },
        ScheduleDeleted: { target: 'Deleted', actions: 'remove' },
      },
    },
    Paused: {
      on: {
        ScheduleFired: { guard: 'isNewManualRun', actions: 'recordFire' },
        ScheduleRunRefused: { guard: 'isOwedRun', actions: 'recordRefusal' },
        ScheduleResumed: {
          target: 'Active',
          actions: assign(({ context, event }) => ({
            cursor: later(event.time, context.cursor),
            pausedAt: null,
          })),
        },
        ScheduleDeleted: { target: 'Deleted', actions: 'remove' },
      },
    },
    Deleted: { type: 'final' },
  },
});

export type ScheduleMachine = typeof scheduleMachine;
