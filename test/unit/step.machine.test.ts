import { describe, it, expect } from 'vitest';
import { initialTransition } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { stepMachine } from '../../actors/step/step.machine.js';
import type { StepEvent } from '../../actors/step/step.events.js';
import {
  stepBlocked,
  stepCreated,
  stepFailed,
  stepReady,
  stepServed,
  stepSkipped,
  stepStarved,
  stepSucceeded,
} from '../helpers/event-builders.js';
import { machineHarness } from '../helpers/unit-machine-harness.js';

type Snap = SnapshotFrom<typeof stepMachine>;
type StepEventType = StepEvent['type'];

const ready = (): Snap => initialTransition(stepMachine, stepCreated({ after: [] }))[0];
const waiting = (): Snap => initialTransition(stepMachine, stepCreated({ after: ['s0'] }))[0];

const harness = machineHarness(stepMachine);
const { fold, accept, expectRefused } = harness;

/** Ready is split by the `starved` flag: StepStarved and StepServed depend on it. */
type Row = 'Waiting' | 'Ready' | 'Ready (starved)' | 'Blocked' | 'Succeeded' | 'Failed' | 'Skipped';

const snapshotOf: Record<Row, () => Snap> = {
  Waiting: waiting,
  Ready: ready,
  'Ready (starved)': () => fold([stepStarved()], ready()),
  Blocked: () => fold([stepBlocked()], ready()),
  Succeeded: () => fold([stepSucceeded()], ready()),
  Failed: () => fold([stepFailed()], ready()),
  Skipped: () => fold([stepSkipped()], waiting()),
};

const EVENTS: Record<StepEventType, () => StepEvent> = {
  StepCreated: () => stepCreated(),
  StepReady: () => stepReady(),
  StepStarved: () => stepStarved(),
  StepServed: () => stepServed(),
  StepBlocked: () => stepBlocked(),
  StepSucceeded: () => stepSucceeded(),
  StepFailed: () => stepFailed(),
  StepSkipped: () => stepSkipped(),
};

/** DESIGN.md section 3: every accepted (state, event) pair with its target state. */
const ACCEPTED: Record<Row, Partial<Record<StepEventType, string>>> = {
  Waiting: { StepReady: 'Ready', StepSkipped: 'Skipped' },
  Ready: {
    StepStarved: 'Ready',
    StepBlocked: 'Blocked',
    StepSucceeded: 'Succeeded',
    StepFailed: 'Failed',
    StepSkipped: 'Skipped',
  },
  'Ready (starved)': {
    StepServed: 'Ready',
    StepBlocked: 'Blocked',
    StepSucceeded: 'Succeeded',
    StepFailed: 'Failed',
    StepSkipped: 'Skipped',
  },
  Blocked: { StepReady: 'Ready', StepFailed: 'Failed', StepSkipped: 'Skipped' },
  Succeeded: {},
  Failed: {},
  Skipped: {},
};

const matrix = harness.eventMatrix({
  events: EVENTS,
  snapshotOf,
  accepted: ACCEPTED,
});

describe('stepMachine', () => {
  describe('StepCreated (initial transition)', () => {
    it('-> Ready when `after` is empty', () => {
      const [snap, actions] = initialTransition(stepMachine, stepCreated({ after: [] }));
      expect(snap.value).toBe('Ready');
      expect(actions).toEqual([]);
      expect(snap.context).toEqual({
        runId: 'r1',
        stepId: 's1',
        tags: ['linux'],
        maxConcurrent: null,
        after: [],
        taskCount: 1,
        output: 'bytes',
        timeoutMs: null,
        priority: 0,
        notBefore: null,
        retry: null,
        starved: false,
        taskIds: [],
        reason: null,
      });
    });

    it('resolves `delayMs` from its own time, and keeps priority and retry policy', () => {
      const retry = {
        maxAttempts: 4,
        backoff: 'fixed',
        initialMs: 500,
        maxMs: 500,
        jitter: 0.5,
      } as const;
      const [snap] = initialTransition(
        stepMachine,
        stepCreated({ priority: 7, delayMs: 90_000, retry }, '2026-01-01T00:00:00.000Z'),
      );
      expect(snap.context).toMatchObject({
        priority: 7,
        notBefore: '2026-01-01T00:01:30.000Z',
        retry,
      });
    });

    it('takes `notBefore` as given, in UTC', () => {
      const [snap] = initialTransition(
        stepMachine,
        stepCreated({ notBefore: '2026-01-01T02:00:00+01:00' }),
      );
      expect(snap.context.notBefore).toBe('2026-01-01T01:00:00.000Z');
    });

    it('-> Waiting when `after` names a step', () => {
      const [snap] = initialTransition(
        stepMachine,
        stepCreated({
          stepId: 's2',
          after: ['s1'],
          maxConcurrent: 10,
          output: 'json',
          timeoutMs: 600_000,
        }),
      );
      expect(snap.value).toBe('Waiting');
      expect(snap.context).toMatchObject({
        after: ['s1'],
        maxConcurrent: 10,
        output: 'json',
        timeoutMs: 600_000,
        starved: false,
      });
    });
  });

  describe('Waiting', () => {
    matrix('Waiting');

    it('StepReady -> Ready, not starved', () => {
      const { next } = accept(waiting(), stepReady());
      expect(next.value).toBe('Ready');
      expect(next.context.starved).toBe(false);
    });

    it('StepSkipped -> Skipped with the reason (an earlier step failed, or the run was cancelled)', () => {
      const { next } = accept(waiting(), stepSkipped({ reason: 'step s0 failed' }));
      expect(next.value).toBe('Skipped');
      expect(next.status).toBe('done');
      expect(next.context.reason).toBe('step s0 failed');
    });

    it('StepStarved is refused: only a Ready step can be starved', () => {
      expectRefused(waiting(), stepStarved());
    });
  });

  describe('Ready', () => {
    matrix('Ready');

    it('StepStarved sets the starved flag and stays Ready', () => {
      const { next, actions } = accept(ready(), stepStarved({ tags: ['gpu'] }));
      expect(next.value).toBe('Ready');
      expect(actions).toEqual([]);
      expect(next.context.starved).toBe(true);
    });

    it('StepStarved when already starved is refused', () => {
      expectRefused(fold([stepStarved()], ready()), stepStarved());
    });

    it('StepServed when not starved is refused', () => {
      expectRefused(ready(), stepServed());
    });

    it('StepServed clears the starved flag; the flag toggles once per change', () => {
      let snap = ready();
      for (let i = 0; i < 3; i++) {
        snap = accept(snap, stepStarved()).next;
        expect(snap.context.starved).toBe(true);
        expectRefused(snap, stepStarved());
        snap = accept(snap, stepServed()).next;
        expect(snap.context.starved).toBe(false);
        expectRefused(snap, stepServed());
      }
      expect(snap.value).toBe('Ready');
    });

    it('StepReady is refused: the step is Ready already', () => {
      expectRefused(ready(), stepReady());
    });

    it('StepBlocked -> Blocked: names the poisoned tasks, clears starved', () => {
      const { next } = accept(fold([stepStarved()], ready()), stepBlocked({ taskIds: ['t2'] }));
      expect(next.value).toBe('Blocked');
      expect(next.context).toMatchObject({ taskIds: ['t2'], starved: false });
    });

    it('StepSucceeded -> Succeeded, not starved', () => {
      const { next } = accept(fold([stepStarved()], ready()), stepSucceeded());
      expect(next.value).toBe('Succeeded');
      expect(next.status).toBe('done');
      expect(next.context.starved).toBe(false);
    });

    it('StepFailed -> Failed with the reason and the tasks', () => {
      const { next } = accept(
        fold([stepStarved()], ready()),
        stepFailed({ reason: 'task t3 failed', taskIds: ['t3'] }),
      );
      expect(next.value).toBe('Failed');
      expect(next.context).toMatchObject({
        reason: 'task t3 failed',
        taskIds: ['t3'],
        starved: false,
      });
    });

    it('StepSkipped -> Skipped (run cancelled), not starved', () => {
      const { next } = accept(fold([stepStarved()], ready()), stepSkipped({ reason: 'cancelled' }));
      expect(next.value).toBe('Skipped');
      expect(next.context).toMatchObject({ reason: 'cancelled', starved: false });
    });
  });

  describe('Ready (starved)', () => {
    matrix('Ready (starved)');
  });

  describe('Blocked', () => {
    matrix('Blocked');

    it('StepReady -> Ready once the poisoned tasks are retried; clears the task list', () => {
      const { next } = accept(fold([stepBlocked({ taskIds: ['t1'] })], ready()), stepReady());
      expect(next.value).toBe('Ready');
      expect(next.context).toMatchObject({ taskIds: [], starved: false });
    });

    it('StepFailed -> Failed once a poisoned task is cancelled', () => {
      const { next } = accept(
        fold([stepBlocked()], ready()),
        stepFailed({ reason: 'task t1 cancelled', taskIds: ['t1'] }),
      );
      expect(next.value).toBe('Failed');
      expect(next.context).toMatchObject({ reason: 'task t1 cancelled', taskIds: ['t1'] });
    });

    it('StepSucceeded is refused: a Blocked step cannot claim success', () => {
      expectRefused(fold([stepBlocked()], ready()), stepSucceeded());
    });
  });

  describe.each(['Succeeded', 'Failed', 'Skipped'] as const)('%s', (row) => {
    matrix(row);

    it('is final', () => {
      expect(snapshotOf[row]().status).toBe('done');
    });
  });
});
