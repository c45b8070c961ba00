import { describe, it, expect } from 'vitest';
import { initialTransition, transition } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { workerMachine } from '../../actors/worker/worker.machine.js';
import type { WorkerState } from '../../actors/worker/worker.machine.js';
import type { WorkerEvent } from '../../actors/worker/worker.events.js';
import {
  at,
  workerDraining,
  workerJoined,
  workerLeft,
  workerLost,
} from '../helpers/event-builders.js';
import { machineHarness } from '../helpers/unit-machine-harness.js';

type Snap = SnapshotFrom<typeof workerMachine>;
type WorkerEventType = WorkerEvent['type'];

const active = (): Snap => initialTransition(workerMachine, workerJoined({}, at(1)))[0];

const harness = machineHarness(workerMachine);
const { accept, expectRefused } = harness;

const EVENTS: Record<WorkerEventType, () => WorkerEvent> = {
  WorkerJoined: () => workerJoined(),
  WorkerDraining: () => workerDraining({ reason: 'shutdown' }, at(5)),
  WorkerLeft: () => workerLeft(at(9)),
  WorkerLost: () => workerLost({ reason: 'expired' }, at(9)),
};

const snapshotOf: Record<WorkerState, () => Snap> = {
  Active: active,
  Draining: () => transition(workerMachine, active(), workerDraining())[0],
  Left: () => transition(workerMachine, active(), workerLeft())[0],
  Lost: () => transition(workerMachine, active(), workerLost())[0],
};

const ACCEPTED: Record<WorkerState, Partial<Record<WorkerEventType, WorkerState>>> = {
  Active: { WorkerDraining: 'Draining', WorkerLeft: 'Left', WorkerLost: 'Lost' },
  Draining: { WorkerLeft: 'Left', WorkerLost: 'Lost' },
  Left: {},
  Lost: {},
};

const matrix = harness.eventMatrix({
  events: EVENTS,
  snapshotOf,
  accepted: ACCEPTED,
  rowIsState: 'refused',
});

describe('workerMachine', () => {
  describe('WorkerJoined (initial transition)', () => {
    it('starts Active with its host, tags and slots', () => {
      const [snap, actions] = initialTransition(
        workerMachine,
        workerJoined(
          {
            workerId: 'w7',
            host: 'ip-10-0-0-7',
            instanceId: 'i-0abc',
            tags: ['linux', 'gpu'],
            slots: 4,
          },
          at(2),
        ),
      );
      expect(snap.value).toBe('Active');
      expect(actions).toEqual([]);
      expect(snap.context).toEqual({
        workerId: 'w7',
        host: 'ip-10-0-0-7',
        instanceId: 'i-0abc',
        tags: ['linux', 'gpu'],
        slots: 4,
        joinedAt: at(2),
        drainReason: null,
        deadline: null,
        lostReason: null,
        endedAt: null,
      });
    });

    it('has no instanceId unless one is given', () => {
      expect(active().context.instanceId).toBeNull();
    });
  });

  describe('Active', () => {
    matrix('Active');

    it('WorkerDraining (spot-interruption) records the reason and the deadline', () => {
      const { next } = accept(
        active(),
        workerDraining({ reason: 'spot-interruption', deadline: at(120) }),
      );
      expect(next.value).toBe('Draining');
      expect(next.status).toBe('active');
      expect(next.context).toMatchObject({ drainReason: 'spot-interruption', deadline: at(120) });
    });

    it('WorkerDraining (shutdown) without a deadline', () => {
      const { next } = accept(active(), workerDraining({ reason: 'shutdown' }));
      expect(next.context).toMatchObject({ drainReason: 'shutdown', deadline: null });
    });

    it('WorkerLeft -> Left with the end time', () => {
      const { next } = accept(active(), workerLeft(at(60)));
      expect(next.value).toBe('Left');
      expect(next.status).toBe('done');
      expect(next.context).toMatchObject({ endedAt: at(60), lostReason: null });
    });

    it.each(['expired', 'exited'] as const)('WorkerLost (%s) -> Lost with the reason', (reason) => {
      const { next } = accept(active(), workerLost({ reason, lastPulseAt: at(40) }, at(60)));
      expect(next.value).toBe('Lost');
      expect(next.status).toBe('done');
      expect(next.context).toMatchObject({ lostReason: reason, endedAt: at(60) });
    });
  });

  describe('Draining', () => {
    matrix('Draining');

    it('WorkerDraining again is refused (one drain per worker)', () => {
      expectRefused(snapshotOf.Draining(), workerDraining({ reason: 'spot-interruption' }));
    });

    it('WorkerLeft -> Left keeps the drain reason', () => {
      const draining = accept(active(), workerDraining({ reason: 'spot-interruption' })).next;
      const { next } = accept(draining, workerLeft(at(30)));
      expect(next.value).toBe('Left');
      expect(next.context).toMatchObject({ drainReason: 'spot-interruption', endedAt: at(30) });
    });

    it.each(['expired', 'exited'] as const)('WorkerLost (%s) -> Lost', (reason) => {
      const { next } = accept(snapshotOf.Draining(), workerLost({ reason, lastPulseAt: null }));
      expect(next.value).toBe('Lost');
      expect(next.context.lostReason).toBe(reason);
    });
  });

  describe.each(['Left', 'Lost'] as const)('%s', (state) => {
    matrix(state);

    it('is final: a workerId is used once', () => {
      expect(snapshotOf[state]().status).toBe('done');
    });
  });
});
