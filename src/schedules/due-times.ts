/**
 * A schedule's due times: a pure function of the times it is given. It never reads the clock,
 * so the backend, `sonar schedule list` and the tests all get the same answer for the same
 * `now`.
 *
 * Cron expressions are read by `cron-parser` (the parser BullMQ's repeatable jobs use): 5
 * fields, or 6 with seconds first, in an IANA time zone through luxon, so `0 2 * * *` in
 * `Europe/Paris` is 02:00 Paris time on either side of a daylight-saving change. Intervals
 * need no parser: their due times are the multiples of the interval since the Unix epoch, the
 * same on every backend whenever it started.
 *
 * @module
 */
import { CronExpressionParser } from 'cron-parser';
import type { CronExpression } from 'cron-parser';
import { ValidationError } from '../../actors/errors.js';

/** How a schedule says when it is due (a `ScheduleCreated`'s fields). */
export interface DueSpec {
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
}

/** Due times in a window: the latest few, and how many there are in all. */
export interface DueWindow {
  /** Ascending: the latest `limit` due times of the window. */
  latest: number[];
  /** How many due times the window holds, counted up to {@link MAX_COUNTED}. */
  count: number;
}

export interface DueTimes {
  /** The first due time strictly after `afterMs`, or null when none comes again. */
  next(afterMs: number): number | null;
  /** The due times in (`afterMs`, `untilMs`]. */
  between(afterMs: number, untilMs: number, limit: number): DueWindow;
}

/**
 * A cron window's due times are counted one by one (each costs a cron evaluation in the
 * expression's time zone), so the count stops here: it only says how many a catch-up passed over.
 */
export const MAX_COUNTED = 1000;

const problem = (path: string, message: string): ValidationError =>
  new ValidationError(`'${path}' ${message}`, [{ path, message }]);

/** True for a time zone name this runtime knows (`UTC`, `Europe/Paris`). */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch (_err: unknown) {
    return false;
  }
}

function intervalTimes(everyMs: number): DueTimes {
  return {
    next: (afterMs) => (Math.floor(afterMs / everyMs) + 1) * everyMs,
    between(afterMs, untilMs, limit) {
      const first = Math.floor(afterMs / everyMs) + 1;
      const last = Math.floor(untilMs / everyMs);
      const count = Math.max(0, last - first + 1);
      const latest: number[] = [];
      for (let k = Math.max(first, last - limit + 1); k <= last; k++) latest.push(k * everyMs);
      return { latest, count };
    },
  };
}

function cronTimes(expression: string, tz: string): DueTimes {
  const parse = (currentDate: number): CronExpression =>
    CronExpressionParser.parse(expression, { currentDate: new Date(currentDate), tz });
  const step = (it: CronExpression, dir: 'next' | 'prev'): number | null => {
    try {
      return it[dir]().getTime();
    } catch (_err: unknown) {
      return null; // out of the expression's range: no more due times
    }
  };
  return {
    next: (afterMs) => step(parse(afterMs), 'next'),
    between(afterMs, untilMs, limit) {
      if (untilMs <= afterMs) return { latest: [], count: 0 };
      // prev() is strictly before its start: start a millisecond past the window's end.
      const back = parse(untilMs + 1);
      const latest: number[] = [];
      while (latest.length < limit) {
        const t = step(back, 'prev');
        if (t === null || t <= afterMs) break;
        latest.unshift(t);
      }
      if (latest.length < limit) return { latest, count: latest.length };
      const forward = parse(afterMs);
      let count = 0;
      while (count < MAX_COUNTED) {
        const t = step(forward, 'next');
        if (t === null || t > untilMs) break;
        count++;
      }
      return { latest, count: Math.max(count, latest.length) };
    },
  };
}

/**
 * The due times of a spec.
 * @throws ValidationError naming the field: a cron expression the parser refuses, an unknown
 *   time zone, an interval that is not whole seconds, or neither or both of cron and interval.
 */
export function dueTimesOf(spec: DueSpec): DueTimes {
  if ((spec.cron === null) === (spec.everyMs === null)) {
    throw problem('cron', 'or an interval (every) is needed, and only one of them');
  }
  if (spec.everyMs !== null) {
    if (!Number.isSafeInteger(spec.everyMs) || spec.everyMs < 1000 || spec.everyMs % 1000 !== 0) {
      throw problem('every', `must be whole seconds, at least 1s, not ${spec.everyMs} ms`);
    }
    return intervalTimes(spec.everyMs);
  }
  const tz = spec.timezone ?? 'UTC';
  if (!isTimeZone(tz)) throw problem('timezone', `is not a time zone: ${JSON.stringify(tz)}`);
  const expression = spec.cron!;
  try {
    CronExpressionParser.parse(expression, { tz, currentDate: new Date(0) });
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw problem('cron', `is not a cron expression (${why}): ${JSON.stringify(expression)}`);
  }
  return cronTimes(expression, tz);
}
