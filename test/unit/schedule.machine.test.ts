import { describe, it, expect } from 'vitest';
import { initialTransition, transition } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { createTransitioner } from '../../actors/transitioner.js';
import {
  RECENT_FIRES,
  RUN_IDS_KEPT,
  runIdsOf,
  scheduleMachine,
} from '../../actors/schedule/schedule.machine.js';
import type { ScheduleContext } from '../../actors/schedule/schedule.machine.js';
import type { ScheduleState } from '../../actors/schedule/schedule.machine.js';
import type { ScheduleEvent } from '../../actors/schedule/schedule.events.js';
import { decodeEvent } from '../../actors/events.js';
import {
  compactTime,
  manualRunId,
  scheduledRunId,
} from '../../actors/schedule/schedule-run-ids.js';
import { ID_RE } from '../../actors/ids.js';
import {
  at,
  scheduleCreated,
  scheduleDeleted,
  scheduleFired,
  schedulePaused,
  scheduleResumed,
  scheduleRunRefused,
} from '../helpers/event-builders.js';
import { machineHarness } from '../helpers/unit-machine-harness.js';

type Snap = SnapshotFrom<typeof scheduleMachine>;
type ScheduleEventType = ScheduleEvent['type'];

const active = (): Snap => initialTransition(scheduleMachine, scheduleCreated({}, at(0)))[0];
const harness = machineHarness(scheduleMachine);
const { accept, expectRefused, fold } = harness;

const EVENTS: Record<ScheduleEventType, () => ScheduleEvent> = {
  ScheduleCreated: () => scheduleCreated(),
  ScheduleFired: () => scheduleFired({ dueAt: at(2) }, at(2)),
  SchedulePaused: () => schedulePaused(at(3)),
  ScheduleResumed: () => scheduleResumed(at(4)),
  ScheduleDeleted: () => scheduleDeleted(at(5)),
  // Of a run the schedule did not fire: refused in every state (accepted cases below).
  ScheduleRunRefused: () => scheduleRunRefused({}, at(6)),
};

const snapshotOf: Record<ScheduleState, () => Snap> = {
  Active: active,
  Paused: () => transition(scheduleMachine, active(), schedulePaused(at(1)))[0],
  Deleted: () => transition(scheduleMachine, active(), scheduleDeleted(at(1)))[0],
};

const ACCEPTED: Record<ScheduleState, Partial<Record<ScheduleEventType, ScheduleState>>> = {
  Active: { ScheduleFired: 'Active', SchedulePaused: 'Paused', ScheduleDeleted: 'Deleted' },
  Paused: { ScheduleResumed: 'Active', ScheduleDeleted: 'Deleted' },
  Deleted: {},
};

const matrix = harness.eventMatrix({
  events: EVENTS,
  snapshotOf,
  accepted: ACCEPTED,
  rowIsState: 'refused',
});

describe('scheduleMachine', () => {
  describe('ScheduleCreated (initial transition)', () => {
    it('starts Active with its cursor at the creation time', () => {
      const [snap, actions] = initialTransition(
        scheduleMachine,
        scheduleCreated({ cron: '0 2 * * *', timezone: 'Europe/Paris' }, at(7)),
      );
      expect(snap.value).toBe('Active');
      expect(actions).toEqual([]);
      expect(snap.context).toMatchObject({
        name: 'nightly',
        cron: '0 2 * * *',
        timezone: 'Europe/Paris',
        everyMs: null,
        createdAt: at(7),
        cursor: at(7),
        lastRun: null,
        recent: [],
        fires: 0,
        runs: 0,
      });
    });

    it('reads a cron without a time zone in UTC, and an interval with none', () => {
      const cron = initialTransition(scheduleMachine, scheduleCreated({ cron: '* * * * *' }))[0];
      expect(cron.context.timezone).toBe('UTC');
      expect(active().context).toMatchObject({ everyMs: 2000, timezone: null, cron: null });
    });
  });

  describe('Active', () => {
    matrix('Active');

    it('ScheduleFired moves the cursor to its due time and records the run', () => {
      const { next } = accept(active(), scheduleFired({ dueAt: at(2) }, at(2.1)));
      expect(next.context).toMatchObject({
        cursor: at(2),
        fires: 1,
        runs: 1,
        lastRun: { dueAt: at(2), runId: 'nightly-20260101T000002Z', at: at(2.1), skipped: null },
      });
    });

    it('a second fire of the same due time, or an earlier one, is refused', () => {
      const fired = fold([scheduleFired({ dueAt: at(4) })], active());
      expectRefused(fired, scheduleFired({ dueAt: at(4) }));
      expectRefused(fired, scheduleFired({ dueAt: at(2) }));
      expect(accept(fired, scheduleFired({ dueAt: at(6) })).next.context.cursor).toBe(at(6));
    });

    it('a due time at or before the creation time is refused', () => {
      const created = initialTransition(scheduleMachine, scheduleCreated({}, at(10)))[0];
      expectRefused(created, scheduleFired({ dueAt: at(10) }));
      expectRefused(created, scheduleFired({ dueAt: at(8) }));
    });

    it('a skipped fire moves the cursor but keeps the last run', () => {
      const fired = fold([scheduleFired({ dueAt: at(2) })], active());
      const { next } = accept(fired, scheduleFired({ dueAt: at(4), skipped: 'overlap' }));
      expect(next.context).toMatchObject({ cursor: at(4), fires: 2, runs: 1 });
      expect(next.context.lastRun?.dueAt).toBe(at(2));
    });

    it('a catch-up fire records the due times it passed over', () => {
      const { next } = accept(
        active(),
        scheduleFired({ dueAt: at(20), trigger: 'catch-up', missed: 9 }),
      );
      expect(next.context.recent[0]).toMatchObject({ trigger: 'catch-up', missed: 9 });
    });

    it('a manual fire leaves the cursor alone and is refused twice for one run id', () => {
      const manual = scheduleFired({
        dueAt: at(30),
        runId: manualRunId('nightly', Date.parse(at(30))),
        trigger: 'manual',
      });
      const { next } = accept(active(), manual);
      expect(next.context).toMatchObject({ cursor: at(0), runs: 1 });
      expectRefused(next, manual);
    });

    it(`keeps the latest ${RECENT_FIRES} fires`, () => {
      const fires = Array.from({ length: RECENT_FIRES + 3 }, (_, i) =>
        scheduleFired({ dueAt: at(2 * (i + 1)) }),
      );
      const snap = fold(fires, active());
      expect(snap.context.recent).toHaveLength(RECENT_FIRES);
      expect(snap.context.recent.at(-1)?.dueAt).toBe(at(2 * (RECENT_FIRES + 3)));
      expect(snap.context.fires).toBe(RECENT_FIRES + 3);
    });
  });

  describe('run ids owed a submit', () => {
    const fire = (i: number) => scheduleFired({ dueAt: at(2 * (i + 1)) });

    it('keeps the run id of every fire that submitted a run, beyond the recent fires', () => {
      const fires = Array.from({ length: RECENT_FIRES + 5 }, (_, i) => fire(i));
      const skipped = scheduleFired({ dueAt: at(1000), skipped: 'overlap' });
      const snap = fold([...fires, skipped], active());
      expect(snap.context.runIds).toEqual(fires.map((f) => f.data.runId));
      expect(snap.context.recent).toHaveLength(RECENT_FIRES);
    });

    it(`keeps at most ${RUN_IDS_KEPT}, the latest`, () => {
      const fires = Array.from({ length: RUN_IDS_KEPT + 2 }, (_, i) => fire(i));
      const snap = fold(fires, active());
      expect(snap.context.runIds).toHaveLength(RUN_IDS_KEPT);
      expect(snap.context.runIds[0]).toBe(fires[2]!.data.runId);
    });

    it('ScheduleRunRefused gives up an owed run, once, Active or Paused', () => {
      const fired = fold([fire(0), fire(1)], active());
      const refusal = scheduleRunRefused(
        { runId: fire(0).data.runId, code: 'validation', message: "'steps' bad" },
        at(9),
      );
      const { next } = accept(fired, refusal);
      expect(next.context).toMatchObject({
        runIds: [fire(1).data.runId],
        refusedRuns: 1,
        lastRefused: { runId: fire(0).data.runId, code: 'validation', at: at(9) },
        runs: 2,
      });
      expectRefused(next, refusal);
      const paused = accept(fired, schedulePaused(at(10))).next;
      expect(accept(paused, refusal).next.value).toBe('Paused');
    });

    it('a context restored from an older snapshot (no runIds) still folds', () => {
      const { runIds: _runIds, ...older } = active().context;
      const snap = { ...active(), context: older as ScheduleContext } as Snap;
      expect(runIdsOf(snap.context)).toEqual([]);
      const { next } = accept(snap, fire(0));
      expect(next.context.runIds).toEqual([fire(0).data.runId]);
    });
  });

  describe('Paused', () => {
    matrix('Paused');

    it('refuses due fires but takes a manual one', () => {
      const paused = snapshotOf.Paused();
      expectRefused(paused, scheduleFired({ dueAt: at(2) }));
      accept(paused, scheduleFired({ dueAt: at(2), runId: 'nightly-x-manual', trigger: 'manual' }));
    });

    it('ScheduleResumed moves the cursor to the resume time: no run for the paused due times', () => {
      const { next } = accept(snapshotOf.Paused(), scheduleResumed(at(60)));
      expect(next.context).toMatchObject({ cursor: at(60), pausedAt: null });
      expectRefused(next, scheduleFired({ dueAt: at(58) }));
    });
  });

  describe('Deleted', () => {
    matrix('Deleted');

    it('is final', () => {
      expect(snapshotOf.Deleted().status).toBe('done');
    });
  });

  it('folds the same on the fast path as with transition()', () => {
    const fast = createTransitioner(scheduleMachine);
    const events = [
      scheduleFired({ dueAt: at(2) }, at(2)),
      scheduleFired({ dueAt: at(2) }, at(2)),
      schedulePaused(at(3)),
      scheduleFired({ dueAt: at(4) }, at(4)),
      scheduleResumed(at(9)),
      scheduleFired({ dueAt: at(10), trigger: 'catch-up', missed: 2 }, at(11)),
      scheduleDeleted(at(12)),
      scheduleResumed(at(13)),
    ];
    let [f] = fast.initial(scheduleCreated({}, at(0)));
    let slow = active();
    const pattern: boolean[] = [];
    for (const e of events) {
      const next = fast.next(f, e);
      const [s] = transition(scheduleMachine, slow, e);
      pattern.push(next !== null);
      if (next === null) {
        expect(s).toBe(slow);
        continue;
      }
      expect({ value: next[0].value, context: next[0].context }).toEqual({
        value: s.value,
        context: s.context,
      });
      f = next[0];
      slow = s;
    }
    expect(pattern).toEqual([true, false, true, false, true, true, true, false]);
  });
});

describe('schedule events', () => {
  it('a created schedule needs exactly one of cron and everyMs, and timezone only with cron', () => {
    const data = scheduleCreated().data;
    const { everyMs: _e, ...neither } = data;
    expect(decodeEvent('ScheduleCreated', neither, at(0)).ok).toBe(false);
    expect(decodeEvent('ScheduleCreated', { ...data, cron: '* * * * *' }, at(0)).ok).toBe(false);
    expect(decodeEvent('ScheduleCreated', { ...data, timezone: 'UTC' }, at(0)).ok).toBe(false);
    expect(decodeEvent('ScheduleCreated', data, at(0)).ok).toBe(true);
  });
});

describe('schedule run ids', () => {
  it('are the schedule name and the due time in compact UTC', () => {
    expect(compactTime(Date.parse('2026-03-29T01:00:00.000Z'))).toBe('20260329T010000Z');
    expect(scheduledRunId('nightly', Date.parse('2026-03-29T01:00:00.000Z'))).toBe(
      'nightly-20260329T010000Z',
    );
  });

  it('stay within the run id pattern for the longest schedule name', () => {
    const name = 'n'.repeat(40);
    const t = Date.parse('2999-12-31T23:59:59.000Z');
    expect(scheduledRunId(name, t)).toMatch(ID_RE);
    expect(manualRunId(name, t)).toMatch(ID_RE);
    expect(manualRunId(name, t)).toHaveLength(64);
  });
});
