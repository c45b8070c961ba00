import { describe, it, expect } from 'vitest';
import { initialTransition } from 'xstate';
import { isSonarError } from '../../actors/errors.js';
import { createProjection } from '../../actors/projection.js';
import { RUN_IDS_KEPT, scheduleMachine } from '../../actors/schedule/schedule.machine.js';
import type { ScheduleContext } from '../../actors/schedule/schedule.machine.js';
import { MAX_COUNTED, dueTimesOf } from '../../src/schedules/due-times.js';
import {
  isOwedFull,
  isRunOpen,
  missedAfterOf,
  nextFire,
  owedRuns,
} from '../../src/schedules/next-fire.js';
import { MAX_MISSED_AFTER_MS } from '../../actors/schedule/schedule.events.js';
import { parseRunTemplate } from '../../src/schedules/run-template.js';
import { at, scheduleCreated } from '../helpers/event-builders.js';

const ms = (iso: string): number => Date.parse(iso);
const iso = (t: number): string => new Date(t).toISOString();

describe('dueTimesOf', () => {
  describe('an interval', () => {
    const every2s = dueTimesOf({ cron: null, timezone: null, everyMs: 2000 });

    it('is due at the multiples of the interval since the epoch, strictly after the time given', () => {
      expect(iso(every2s.next(ms(at(0)))!)).toBe(at(2));
      expect(iso(every2s.next(ms(at(1.999)))!)).toBe(at(2));
      expect(iso(every2s.next(ms(at(2)))!)).toBe(at(4));
    });

    it('lists a window (after, until], the latest few, and counts them all', () => {
      const w = every2s.between(ms(at(0)), ms(at(20)), 3);
      expect(w.latest.map(iso)).toEqual([at(16), at(18), at(20)]);
      expect(w.count).toBe(10);
      expect(every2s.between(ms(at(20)), ms(at(20)), 3)).toEqual({ latest: [], count: 0 });
      expect(every2s.between(ms(at(20)), ms(at(21.9)), 3)).toEqual({ latest: [], count: 0 });
    });

    it('counts a window of years without walking it', () => {
      const every1s = dueTimesOf({ cron: null, timezone: null, everyMs: 1000 });
      const w = every1s.between(0, 365 * 86_400_000, 2);
      expect(w.count).toBe(365 * 86_400);
      expect(w.latest).toEqual([365 * 86_400_000 - 1000, 365 * 86_400_000]);
    });
  });

  describe('a cron expression', () => {
    it('reads the time zone across a daylight-saving change', () => {
      const paris = dueTimesOf({ cron: '30 2 * * *', timezone: 'Europe/Paris', everyMs: null });
      // 2026-03-29: 02:00 in Paris jumps to 03:00, so 02:30 does not exist that night.
      const before = paris.next(ms('2026-03-27T12:00:00.000Z'))!;
      expect(iso(before)).toBe('2026-03-28T01:30:00.000Z'); // 02:30 CET
      const after = paris.next(ms('2026-03-29T12:00:00.000Z'))!;
      expect(iso(after)).toBe('2026-03-30T00:30:00.000Z'); // 02:30 CEST
      const utc = dueTimesOf({ cron: '30 2 * * *', timezone: null, everyMs: null });
      expect(iso(utc.next(ms('2026-03-27T12:00:00.000Z'))!)).toBe('2026-03-28T02:30:00.000Z');
    });

    it('takes six fields, seconds first', () => {
      const every2s = dueTimesOf({ cron: '*/2 * * * * *', timezone: 'UTC', everyMs: null });
      expect(iso(every2s.next(ms(at(1)))!)).toBe(at(2));
      const w = every2s.between(ms(at(0)), ms(at(10)), 2);
      expect(w).toEqual({ latest: [ms(at(8)), ms(at(10))], count: 5 });
    });

    it('a window shorter than the limit is listed whole, its ends as for an interval', () => {
      const hourly = dueTimesOf({ cron: '0 * * * *', timezone: 'UTC', everyMs: null });
      const w = hourly.between(ms('2026-01-01T00:00:00.000Z'), ms('2026-01-01T03:00:00.000Z'), 10);
      expect(w.latest.map(iso)).toEqual([
        '2026-01-01T01:00:00.000Z',
        '2026-01-01T02:00:00.000Z',
        '2026-01-01T03:00:00.000Z',
      ]);
      expect(w.count).toBe(3);
    });

    it(`counts a long window up to ${MAX_COUNTED}`, () => {
      const minutely = dueTimesOf({ cron: '* * * * *', timezone: 'UTC', everyMs: null });
      const w = minutely.between(0, 30 * 86_400_000, 1);
      expect(w.latest).toEqual([30 * 86_400_000]);
      expect(w.count).toBe(MAX_COUNTED);
    });
  });

  it('refuses a bad spec, naming the field', () => {
    const refused = (spec: Parameters<typeof dueTimesOf>[0]): string => {
      try {
        dueTimesOf(spec);
      } catch (err: unknown) {
        expect(isSonarError(err, 'validation')).toBe(true);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({ cron: 'every day', timezone: null, everyMs: null })).toMatch(/^'cron' is not/);
    expect(refused({ cron: '0 2 * * *', timezone: 'Mars/Olympus', everyMs: null })).toMatch(
      /^'timezone' is not a time zone/,
    );
    expect(refused({ cron: null, timezone: null, everyMs: 1500 })).toMatch(
      /^'every' must be whole/,
    );
    expect(refused({ cron: null, timezone: null, everyMs: null })).toMatch(/^'cron'/);
    expect(refused({ cron: '* * * * *', timezone: null, everyMs: 1000 })).toMatch(/^'cron'/);
  });
});

/** A schedule's context as the machine makes it, with overrides. */
function schedule(over: Partial<ScheduleContext> = {}): ScheduleContext {
  const [snap] = initialTransition(scheduleMachine, scheduleCreated({}, at(0)));
  return { ...snap.context, ...over };
}

const every2s = dueTimesOf({ cron: null, timezone: null, everyMs: 2000 });

describe('nextFire', () => {
  it('fires nothing before the first due time, and fires it at the due time', () => {
    expect(nextFire(schedule(), ms(at(1.999)), every2s, { lastRunOpen: false })).toBeNull();
    expect(nextFire(schedule(), ms(at(2)), every2s, { lastRunOpen: false })).toEqual({
      dueAt: at(2),
      runId: 'nightly-20260101T000002Z',
      trigger: 'due',
      missed: 0,
    });
  });

  it('fires the oldest due time first, one at a time', () => {
    const fire = nextFire(schedule({ cursor: at(2) }), ms(at(9)), every2s, { lastRunOpen: false });
    expect(fire).toMatchObject({ dueAt: at(4), trigger: 'due', missed: 0 });
  });

  it('a due time exactly missedAfter late is still due; a millisecond later it is missed', () => {
    const s = schedule({ missedAfterMs: 10_000 });
    expect(nextFire(s, ms(at(12)), every2s, { lastRunOpen: false })).toMatchObject({
      dueAt: at(2),
      trigger: 'due',
    });
    expect(nextFire(s, ms(at(12.001)), every2s, { lastRunOpen: false })).toMatchObject({
      dueAt: at(2),
      trigger: 'catch-up',
      missed: 0,
    });
  });

  describe('after downtime (due times missed)', () => {
    // Due at 2, 4, ..., 50; seen at 51 with missedAfter 10 s: 2..40 are missed (20 of them),
    // 42..50 are not.
    const now = ms(at(51));

    it('catch-up none passes over them all with one skipped fire at the latest', () => {
      const s = schedule({ missedAfterMs: 10_000, catchUp: 'none' });
      expect(nextFire(s, now, every2s, { lastRunOpen: false })).toEqual({
        dueAt: at(40),
        runId: 'nightly-20260101T000040Z',
        trigger: 'catch-up',
        skipped: 'catch-up',
        missed: 19,
      });
    });

    it('catch-up last runs the latest only', () => {
      const s = schedule({ missedAfterMs: 10_000, catchUp: 'last' });
      expect(nextFire(s, now, every2s, { lastRunOpen: false })).toEqual({
        dueAt: at(40),
        runId: 'nightly-20260101T000040Z',
        trigger: 'catch-up',
        missed: 19,
      });
    });

    it('catch-up all runs the latest catchUpLimit, oldest first', () => {
      const s = schedule({ missedAfterMs: 10_000, catchUp: 'all', catchUpLimit: 3 });
      expect(nextFire(s, now, every2s, { lastRunOpen: false })).toMatchObject({
        dueAt: at(36),
        trigger: 'catch-up',
        missed: 17,
      });
      const after = schedule({ ...s, cursor: at(36) });
      expect(nextFire(after, now, every2s, { lastRunOpen: false })).toMatchObject({
        dueAt: at(38),
        missed: 0,
      });
      const caughtUp = schedule({ ...s, cursor: at(40) });
      expect(nextFire(caughtUp, now, every2s, { lastRunOpen: false })).toMatchObject({
        trigger: 'due',
      });
    });

    it('catch-up all judged as of its start runs catchUpLimit fires however long they take', () => {
      const s = schedule({
        missedAfterMs: 10_000,
        catchUp: 'all',
        catchUpLimit: 3,
        cursor: at(38),
      });
      // At 53, 42 is missed too; judged as of 51, when the catch-up began, it is not.
      const later = ms(at(53));
      expect(nextFire(s, later, every2s, { lastRunOpen: false })).toMatchObject({
        dueAt: at(40),
        trigger: 'catch-up',
      });
      const last = schedule({ ...s, cursor: at(40) });
      expect(nextFire(last, later, every2s, { lastRunOpen: false })).toMatchObject({
        dueAt: at(42),
        trigger: 'catch-up',
      });
      expect(nextFire(last, later, every2s, { lastRunOpen: false, missedAsOf: now })).toMatchObject(
        { dueAt: at(42), trigger: 'due', missed: 0 },
      );
    });

    it('then fires the due times not missed as due', () => {
      const s = schedule({ missedAfterMs: 10_000, cursor: at(40) });
      expect(nextFire(s, ms(at(52)), every2s, { lastRunOpen: false })).toMatchObject({
        dueAt: at(42),
        trigger: 'due',
      });
    });
  });

  it('overlap skip skips while the last run is open; allow fires', () => {
    expect(
      nextFire(schedule({ overlap: 'skip' }), ms(at(2)), every2s, { lastRunOpen: true }),
    ).toMatchObject({
      dueAt: at(2),
      skipped: 'overlap',
    });
    const allowed = nextFire(schedule({ overlap: 'allow' }), ms(at(2)), every2s, {
      lastRunOpen: true,
    });
    expect(allowed).not.toHaveProperty('skipped');
  });

  it('a skip for catch-up stays a catch-up skip whatever the overlap', () => {
    const s = schedule({ missedAfterMs: 1000, catchUp: 'none', overlap: 'skip' });
    expect(nextFire(s, ms(at(10)), every2s, { lastRunOpen: true })).toMatchObject({
      skipped: 'catch-up',
    });
  });
});

describe('isRunOpen', () => {
  it('is open while Running or owed, closed once ended, expired or no longer owed', () => {
    const p = createProjection();
    const s = schedule({ runIds: ['r1', 'r2'] });
    expect(isRunOpen(p, s, 'r1')).toBe(true); // fired, not submitted yet
    p.activeRuns.add('r1');
    p.runs.set('r1', { seq: 1, snapshot: {} as never });
    expect(isRunOpen(p, s, 'r1')).toBe(true);
    p.activeRuns.delete('r1');
    expect(isRunOpen(p, s, 'r1')).toBe(false);
    p.expiredRuns.set('r2', {} as never);
    expect(isRunOpen(p, s, 'r2')).toBe(false);
    // Refused for good (gone from runIds): not going, so overlap skip fires again.
    expect(isRunOpen(p, s, 'r3')).toBe(false);
  });
});

describe('owed runs', () => {
  it('are the fired runs the log does not hold, however many fires came since', () => {
    const p = createProjection();
    const runIds = Array.from({ length: 50 }, (_, i) => `r${i}`);
    for (const r of runIds.slice(1)) p.runs.set(r, { seq: 1, snapshot: {} as never });
    expect(owedRuns(p, schedule({ runIds }))).toEqual(['r0']);
  });

  it(`hold a fire that would push an owed run out of the ${RUN_IDS_KEPT} kept`, () => {
    const p = createProjection();
    const runIds = Array.from({ length: RUN_IDS_KEPT }, (_, i) => `r${i}`);
    const s = schedule({ runIds, overlap: 'allow' });
    expect(isOwedFull(p, s)).toBe(true);
    expect(nextFire(s, ms(at(2)), every2s, { lastRunOpen: true, owedFull: true })).toBeNull();
    // A skipped fire keeps no run id: it is made.
    const skip = schedule({ runIds, overlap: 'skip' });
    expect(nextFire(skip, ms(at(2)), every2s, { lastRunOpen: true, owedFull: true })).toMatchObject(
      { skipped: 'overlap' },
    );
    p.runs.set('r0', { seq: 1, snapshot: {} as never });
    expect(isOwedFull(p, s)).toBe(false);
    expect(isOwedFull(p, schedule({ runIds: runIds.slice(1) }))).toBe(false);
  });
});

describe('a bounded judgement', () => {
  it('reads a stored missedAfter beyond the bound as the bound', () => {
    const s = schedule({ missedAfterMs: 365 * 86_400_000, catchUp: 'last' });
    const now = ms(at(0)) + 30 * 86_400_000;
    expect(missedAfterOf(s)).toBe(MAX_MISSED_AFTER_MS);
    // A month later: everything older than a day is missed, caught up as one run.
    const fire = nextFire(s, now, every2s, { lastRunOpen: false });
    expect(fire).toMatchObject({ trigger: 'catch-up' });
    expect(ms(fire!.dueAt)).toBeLessThan(now - MAX_MISSED_AFTER_MS);
  });

  it('walks at most MAX_COUNTED cron steps, whatever the window', () => {
    const everySecond = dueTimesOf({
      cron: '* * * * * *',
      timezone: 'Europe/Paris',
      everyMs: null,
    });
    const w = everySecond.between(0, 30 * 86_400_000, 100);
    expect(w.latest).toHaveLength(100);
    expect(w.count).toBe(MAX_COUNTED);
    const started = performance.now();
    everySecond.between(0, 30 * 86_400_000, 100);
    // Generous for a loaded machine; unbounded, this walk takes seconds.
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe('parseRunTemplate', () => {
  const limits = { maxInputBytes: 1024 };

  it('parses a run file without runId, defaults filled in', () => {
    const t = parseRunTemplate({ steps: [{ id: 's', tags: ['x'], tasks: [{ id: 't' }] }] }, limits);
    expect(t).toEqual({
      steps: [{ id: 's', tags: ['x'], after: [], output: 'bytes', tasks: [{ id: 't' }] }],
    });
  });

  it('refuses a runId and every run-file problem, under run', () => {
    expect(() => parseRunTemplate({ runId: 'x', steps: [] }, limits)).toThrow(/'run.runId'/);
    expect(() => parseRunTemplate({ steps: [{ id: 's', tags: [], tasks: [] }] }, limits)).toThrow(
      /'run\.steps\.0\.tags'/,
    );
  });
});
