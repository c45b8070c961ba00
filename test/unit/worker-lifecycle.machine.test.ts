import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import {
  isAccepting,
  isEnded,
  isReleasing,
  lifecycleMachine,
  workerStateOf,
} from '../../src/worker/lifecycle.machine.js';
import type { LifecycleEvent } from '../../src/worker/lifecycle.machine.js';

const DRAIN: LifecycleEvent = {
  type: 'drain',
  reason: 'spot-interruption',
  deadline: '2026-01-01T00:02:00.000Z',
};
const FAIL: LifecycleEvent = { type: 'fail', error: new Error('conflict') };

/** The lifecycle after `events`, from Idle. */
function after(...events: LifecycleEvent[]) {
  const actor = createActor(lifecycleMachine).start();
  for (const e of events) actor.send(e);
  return actor.getSnapshot();
}

describe('the worker process lifecycle', () => {
  it('goes Idle, Joining, Active, Draining (Finishing, Releasing), Stopped', () => {
    expect(after().value).toBe('Idle');
    expect(after({ type: 'start' }).value).toBe('Joining');
    expect(after({ type: 'start' }, { type: 'joined' }).value).toBe('Active');
    const draining = after({ type: 'start' }, { type: 'joined' }, DRAIN);
    expect(draining.value).toEqual({ Draining: 'Finishing' });
    expect(draining.context).toMatchObject({
      drainReason: 'spot-interruption',
      deadline: DRAIN.type === 'drain' && DRAIN.deadline,
    });
    const released = after({ type: 'start' }, { type: 'joined' }, DRAIN, { type: 'release' });
    expect(released.value).toEqual({ Draining: 'Releasing' });
    const stopped = after(
      { type: 'start' },
      { type: 'joined' },
      DRAIN,
      { type: 'release' },
      { type: 'stopped' },
    );
    expect(stopped.value).toBe('Stopped');
    expect(isEnded(stopped)).toBe(true);
  });

  it('accepts pulled messages only while Active, and releases only once told to', () => {
    const cases: [LifecycleEvent[], boolean, boolean][] = [
      [[{ type: 'start' }], false, false],
      [[{ type: 'start' }, { type: 'joined' }], true, false],
      [[{ type: 'start' }, { type: 'joined' }, DRAIN], false, false],
      [[{ type: 'start' }, { type: 'joined' }, DRAIN, { type: 'release' }], false, true],
      [[{ type: 'start' }, { type: 'joined' }, FAIL], false, true],
    ];
    for (const [events, accepting, releasing] of cases) {
      const s = after(...events);
      expect(isAccepting(s), JSON.stringify(s.value)).toBe(accepting);
      expect(isReleasing(s), JSON.stringify(s.value)).toBe(releasing);
    }
  });

  it('a second stop request while draining releases at once', () => {
    const s = after({ type: 'start' }, { type: 'joined' }, DRAIN, DRAIN);
    expect(s.value).toEqual({ Draining: 'Releasing' });
  });

  it('drained before it started: Stopped with nothing to drain', () => {
    expect(after(DRAIN).value).toBe('Stopped');
  });

  it('a drain while joining drains; joining after that does not make it Active', () => {
    expect(after({ type: 'start' }, DRAIN, { type: 'joined' }).value).toEqual({
      Draining: 'Finishing',
    });
  });

  it('fails from Joining, Active or Draining and keeps the error; ended is final', () => {
    for (const events of [
      [{ type: 'start' }],
      [{ type: 'start' }, { type: 'joined' }],
      [{ type: 'start' }, { type: 'joined' }, DRAIN],
    ] as LifecycleEvent[][]) {
      const s = after(...events, FAIL);
      expect(s.value).toBe('Failed');
      expect(s.context.error).toBe(FAIL.type === 'fail' && FAIL.error);
      expect(after(...events, FAIL, { type: 'stopped' }).value).toBe('Failed');
    }
    expect(
      after({ type: 'start' }, { type: 'joined' }, DRAIN, { type: 'stopped' }, FAIL).value,
    ).toBe('Stopped');
  });

  it('reads as the public worker state: Joining and Active are both Running', () => {
    expect(workerStateOf(after())).toBe('Idle');
    expect(workerStateOf(after({ type: 'start' }))).toBe('Running');
    expect(workerStateOf(after({ type: 'start' }, { type: 'joined' }))).toBe('Running');
    expect(workerStateOf(after({ type: 'start' }, { type: 'joined' }, DRAIN))).toBe('Draining');
    expect(workerStateOf(after(DRAIN))).toBe('Stopped');
    expect(workerStateOf(after({ type: 'start' }, FAIL))).toBe('Failed');
  });
});
