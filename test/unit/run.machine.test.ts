import { describe, it, expect } from 'vitest';
import { initialTransition, transition } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { runMachine } from '../../actors/run/run.machine.js';
import type { RunState } from '../../actors/run/run.machine.js';
import type { RunEvent } from '../../actors/run/run.events.js';
import {
  at,
  runCancelled,
  runFailed,
  runSubmitted,
  runSucceeded,
} from '../helpers/event-builders.js';
import { machineHarness } from '../helpers/unit-machine-harness.js';

type Snap = SnapshotFrom<typeof runMachine>;
type RunEventType = RunEvent['type'];

const running = (): Snap =>
  initialTransition(runMachine, runSubmitted({ stepIds: ['s1', 's2'], taskCount: 3 }, at(1)))[0];

const harness = machineHarness(runMachine);
const { accept } = harness;

const EVENTS: Record<RunEventType, () => RunEvent> = {
  RunSubmitted: () => runSubmitted(),
  RunSucceeded: () => runSucceeded(at(9)),
  RunFailed: () => runFailed({ reason: 'step s1 failed' }, at(9)),
  RunCancelled: () => runCancelled({ reason: 'operator' }, at(9)),
};

const snapshotOf: Record<RunState, () => Snap> = {
  Running: running,
  Succeeded: () => transition(runMachine, running(), runSucceeded())[0],
  Failed: () => transition(runMachine, running(), runFailed())[0],
  Cancelled: () => transition(runMachine, running(), runCancelled())[0],
};

const ACCEPTED: Record<RunState, Partial<Record<RunEventType, RunState>>> = {
  Running: { RunSucceeded: 'Succeeded', RunFailed: 'Failed', RunCancelled: 'Cancelled' },
  Succeeded: {},
  Failed: {},
  Cancelled: {},
};

const matrix = harness.eventMatrix({
  events: EVENTS,
  snapshotOf,
  accepted: ACCEPTED,
  rowIsState: 'refused',
  acceptedStatus: 'done',
});

describe('runMachine', () => {
  describe('RunSubmitted (initial transition)', () => {
    it('starts Running with the steps, the task count and the submit time', () => {
      const [snap, actions] = initialTransition(
        runMachine,
        runSubmitted({ runId: 'scan-42', stepIds: ['crawl', 'parse'], taskCount: 7 }, at(3)),
      );
      expect(snap.value).toBe('Running');
      expect(actions).toEqual([]);
      expect(snap.context).toEqual({
        runId: 'scan-42',
        stepIds: ['crawl', 'parse'],
        taskCount: 7,
        submittedAt: at(3),
        endedAt: null,
        reason: null,
      });
    });
  });

  describe('Running', () => {
    matrix('Running');

    it('RunSucceeded records the end time and no reason', () => {
      const { next } = accept(running(), runSucceeded(at(50)));
      expect(next.context).toMatchObject({ endedAt: at(50), reason: null });
    });

    it('RunFailed records the end time and the reason', () => {
      const { next } = accept(running(), runFailed({ reason: 'step s2 failed' }, at(50)));
      expect(next.context).toMatchObject({ endedAt: at(50), reason: 'step s2 failed' });
    });

    it('RunCancelled records the end time and the reason', () => {
      const { next } = accept(running(), runCancelled({ reason: 'operator' }, at(50)));
      expect(next.context).toMatchObject({ endedAt: at(50), reason: 'operator' });
    });
  });

  describe.each(['Succeeded', 'Failed', 'Cancelled'] as const)('%s', (state) => {
    matrix(state);

    it('is final', () => {
      expect(snapshotOf[state]().status).toBe('done');
    });
  });
});
