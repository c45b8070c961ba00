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

/** The fires a schedule keeps (latest last): for `list`, the dashboard and finishing submits. */
export const RECENT_FIRES = 10;

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
  /** `ScheduleFired` events, and how many of them submitted a run. */
  fires: number;
  runs: number;
  pausedAt: string | null;
  deletedAt: string | null;
}

export type ScheduleState = 'Active' | 'Paused' | 'Deleted';

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
 * are not run later.
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
        fires: context.fires + 1,
        runs: context.runs + (submitted ? 1 : 0),
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
