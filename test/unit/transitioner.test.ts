import { describe, it, expect } from 'vitest';
import { and, initialTransition, not, or, setup, stateIn, transition } from 'xstate';
import type { AnyStateMachine, EventFromLogic, InputFrom, SnapshotFrom } from 'xstate';
import { createTransitioner } from '../../actors/transitioner.js';
import type { Snap } from '../../actors/transitioner.js';
import { runMachine } from '../../actors/run/run.machine.js';
import { stepMachine } from '../../actors/step/step.machine.js';
import { taskMachine } from '../../actors/task/task.machine.js';
import { workerMachine } from '../../actors/worker/worker.machine.js';
import {
  at,
  runCancelled,
  runSucceeded,
  runSubmitted,
  stepBlocked,
  stepCreated,
  stepReady,
  stepServed,
  stepStarved,
  stepSucceeded,
  taskAttemptFailed,
  taskCancelled,
  taskCreated,
  taskDead,
  taskFinalizeRetried,
  taskFinalized,
  taskPoisoned,
  taskPublished,
  taskRequeued,
  taskResultAccepted,
  taskStarted,
  workerDraining,
  workerJoined,
  workerLeft,
  workerLost,
} from '../helpers/event-builders.js';

interface Seen {
  value: string;
  status: string;
  context: unknown;
  actions: string[];
}

const seen = (
  _machine: AnyStateMachine,
  snap: { value: unknown; status: string; context: unknown },
  actions: string[],
): Seen => ({
  value: String(snap.value),
  status: snap.status,
  context: snap.context,
  actions,
});

/** The projection's plain form of an XState snapshot. */
const toSnap = <C>(s: { value: unknown; context: C; status: string }): Snap<C> => ({
  value: String(s.value),
  context: s.context,
  status: s.status === 'done' ? 'done' : 'active',
});

/**
 * Folds `events` from `input` twice, once with createTransitioner and once with the public
 * initialTransition/transition, and checks every step gives the same value, context, status,
 * persisted snapshot and action names. A refused event is `null` on the fast path and the
 * identical snapshot from `transition()`. Returns the accepted/refused pattern.
 */
function compare<M extends AnyStateMachine>(
  machine: M,
  input: InputFrom<M>,
  events: EventFromLogic<M>[],
): boolean[] {
  const fast = createTransitioner(machine);
  const [fastInitial, fastInitialActions] = fast.initial(input);
  const [slowInitial, slowInitialActions] = initialTransition(machine, input);
  expect(seen(machine, fastInitial, fastInitialActions)).toEqual(
    seen(
      machine,
      slowInitial,
      slowInitialActions.map((a) => a.type),
    ),
  );
  let fastSnap = fastInitial;
  let slowSnap: SnapshotFrom<M> = slowInitial;
  const pattern: boolean[] = [];
  for (const event of events) {
    const fastNext = fast.next(fastSnap, event);
    const [slowNext, slowActions] = transition(machine, slowSnap, event);
    if (fastNext === null) {
      expect(slowNext, `${String((event as { type: string }).type)} refused`).toBe(slowSnap);
      expect(slowActions).toEqual([]);
      pattern.push(false);
      continue;
    }
    const label = String((event as { type: string }).type);
    expect(seen(machine, fastNext[0], fastNext[1]), label).toEqual(
      seen(
        machine,
        slowNext,
        slowActions.map((a) => a.type),
      ),
    );
    fastSnap = fastNext[0];
    slowSnap = slowNext;
    pattern.push(true);
  }
  return pattern;
}

describe('createTransitioner', () => {
  it('equals transition() on a task through retries, recoveries, poison and a refused tail', () => {
    const pattern = compare(taskMachine, taskCreated({ maxAttempts: 3 }), [
      taskPublished({ attempt: 1 }, at(1)),
      taskStarted({ attemptId: 'a1', workerId: 'w1' }, at(2)),
      taskStarted({ attemptId: 'a1' }, at(2)), // refused: already Running
      taskAttemptFailed({ attemptId: 'a1', retryAt: at(4) }, at(3)),
      taskPublished({ attempt: 3 }, at(4)), // refused: not previous+1
      taskPublished({ attempt: 2 }, at(4)),
      taskStarted({ attemptId: 'a2', workerId: 'w2' }, at(5)),
      taskRequeued({ attemptId: 'a2', reason: 'worker-lost' }, at(6)),
      taskPublished({ attempt: 3 }, at(7)),
      taskRequeued({ attemptId: 'a3', reason: 'publish-timeout', recoveries: 1 }, at(8)),
      taskPublished({ attempt: 4 }, at(9)),
      taskStarted({ attemptId: 'a3' }, at(10)), // refused: stale attempt
      taskStarted({ attemptId: 'a4', workerId: 'w3' }, at(10)),
      taskResultAccepted({ attemptId: 'a4', workerId: 'w3' }, at(11)),
      taskPoisoned({ attemptId: 'a4' }, at(12)),
      taskFinalizeRetried({ attemptId: 'a4' }, at(13)),
      taskFinalized({ attemptId: 'a3' }, at(14)), // refused: stale attempt
      taskFinalized({ attemptId: 'a4' }, at(14)),
      taskCancelled({}, at(15)), // refused: terminal
    ]);
    expect(pattern).toEqual([
      true,
      true,
      false,
      true,
      false,
      true,
      true,
      true,
      true,
      true,
      true,
      false,
      true,
      true,
      true,
      true,
      false,
      true,
      false,
    ]);
  });

  it('equals transition() on failures that end a task, and on death', () => {
    expect(
      compare(taskMachine, taskCreated({ maxAttempts: 1 }), [
        taskPublished(),
        taskStarted(),
        taskAttemptFailed(),
        taskPublished({ attempt: 2 }),
      ]),
    ).toEqual([true, true, true, false]);
    expect(
      compare(taskMachine, taskCreated(), [
        taskPublished(),
        taskStarted(),
        taskDead({ recoveries: 1 }),
        taskDead({ recoveries: 2 }),
      ]),
    ).toEqual([true, true, true, false]);
  });

  it('equals transition() on a step, including the transient Created state and toggles', () => {
    expect(
      compare(stepMachine, stepCreated({ after: ['s0'] }), [
        stepStarved(),
        stepReady(),
        stepStarved(),
        stepStarved(),
        stepServed(),
        stepServed(),
        stepBlocked(),
        stepSucceeded(),
        stepReady(),
        stepSucceeded(),
      ]),
    ).toEqual([false, true, true, false, true, false, true, false, true, true]);
    expect(compare(stepMachine, stepCreated({ after: [] }), [stepReady()])).toEqual([false]);
  });

  it('equals transition() on a run and a worker', () => {
    expect(
      compare(runMachine, runSubmitted(), [runSucceeded(at(5)), runCancelled({}, at(6))]),
    ).toEqual([true, false]);
    expect(
      compare(workerMachine, workerJoined(), [
        workerDraining({ reason: 'spot-interruption', deadline: at(120) }),
        workerDraining({ reason: 'shutdown' }),
        workerLost({ reason: 'exited' }),
        workerLeft(),
      ]),
    ).toEqual([true, false, true, false]);
  });

  it('returns a fresh action list each time (the buffer is not shared)', () => {
    const fast = createTransitioner(taskMachine);
    let [snap] = fast.initial(taskCreated());
    for (const e of [taskPublished(), taskStarted()]) snap = fast.next(snap, e)![0];
    const accepted = fast.next(snap, taskResultAccepted())!;
    expect(accepted[1]).toEqual(['enqueueFinalization']);
    fast.next(accepted[0], taskFinalized());
    fast.initial(taskCreated({ taskId: 't2' }));
    expect(accepted[1]).toEqual(['enqueueFinalization']);
  });

  it('takes snapshots made by transition() and gives snapshots transition() takes', () => {
    const fast = createTransitioner(taskMachine);
    const [created] = initialTransition(taskMachine, taskCreated());
    const [published] = fast.next(toSnap(created), taskPublished())!;
    const [running] = transition(taskMachine, taskMachine.resolveState(published), taskStarted());
    const [finalizing, actions] = fast.next(toSnap(running), taskResultAccepted())!;
    expect(finalizing.value).toBe('Finalizing');
    expect(actions).toEqual(['enqueueFinalization']);
    const resolved = taskMachine.resolveState(finalizing);
    expect(transition(taskMachine, resolved, taskFinalized())[0].value).toBe('Succeeded');
  });

  it('a refused event is null and leaves the snapshot as it was', () => {
    const fast = createTransitioner(taskMachine);
    const [snap] = fast.initial(taskCreated());
    const persisted = JSON.stringify(snap);
    expect(fast.next(snap, taskStarted())).toBeNull();
    expect(fast.next(snap, taskFinalized())).toBeNull();
    expect(JSON.stringify(snap)).toBe(persisted);
    expect(snap.value).toBe('Pending');
  });
});

describe('createTransitioner refusals', () => {
  /** Every snapshot met along a few task lives, folded with the public transition(). */
  function taskSnapshots(): SnapshotFrom<typeof taskMachine>[] {
    const lives = [
      [taskPublished(), taskStarted(), taskResultAccepted(), taskPoisoned(), taskFinalizeRetried()],
      [taskPublished(), taskStarted(), taskResultAccepted(), taskFinalized()],
      [taskPublished(), taskStarted(), taskRequeued(), taskPublished({ attempt: 2 })],
      [taskPublished(), taskStarted(), taskAttemptFailed(), taskPublished({ attempt: 2 })],
      [taskPublished(), taskStarted(), taskAttemptFailed({ retryable: false })],
      [taskPublished(), taskDead()],
      [taskCancelled()],
    ];
    const out: SnapshotFrom<typeof taskMachine>[] = [];
    for (const life of lives) {
      let snap = initialTransition(taskMachine, taskCreated())[0];
      out.push(snap);
      for (const event of life) {
        snap = transition(taskMachine, snap, event)[0];
        out.push(snap);
      }
    }
    return out;
  }

  /** Current, stale and unknown attempts of every task event type. */
  const candidates = [
    taskCreated(),
    ...[0, 1, 2, 3].map((attempt) => taskPublished({ attempt })),
    ...['a1', 'a2', 'zz'].flatMap((attemptId) => [
      taskStarted({ attemptId }),
      taskRequeued({ attemptId }),
      taskRequeued({ attemptId, reason: 'operator', recoveries: 0 }),
      taskAttemptFailed({ attemptId }),
      taskAttemptFailed({ attemptId, retryable: false }),
      taskResultAccepted({ attemptId }),
      taskFinalized({ attemptId }),
      taskPoisoned({ attemptId }),
      taskFinalizeRetried({ attemptId }),
    ]),
    taskDead(),
    taskCancelled(),
  ];

  it('next() is null exactly when can() is false, for every task snapshot and event', () => {
    const fast = createTransitioner(taskMachine);
    let accepted = 0;
    let refused = 0;
    for (const snap of taskSnapshots()) {
      for (const event of candidates) {
        const label = `${event.type} ${JSON.stringify(event.data)} in ${String(snap.value)}`;
        const got = fast.next(toSnap(snap), event);
        expect(got === null, label).toBe(!snap.can(event));
        const [slow, slowActions] = transition(taskMachine, snap, event);
        if (got === null) {
          expect(slow, label).toBe(snap);
          refused++;
        } else {
          expect(got[0].value, label).toBe(slow.value);
          expect(got[0].context, label).toEqual(slow.context);
          expect(got[1], label).toEqual(slowActions.map((a) => a.type));
          accepted++;
        }
      }
    }
    expect(accepted).toBeGreaterThan(20);
    expect(refused).toBeGreaterThan(500);
  });

  it('next() is null exactly when can() is false, for every step snapshot and event', () => {
    const fast = createTransitioner(stepMachine);
    const waiting = initialTransition(stepMachine, stepCreated({ after: ['s0'] }))[0];
    const ready = transition(stepMachine, waiting, stepReady())[0];
    const starved = transition(stepMachine, ready, stepStarved())[0];
    const blocked = transition(stepMachine, ready, stepBlocked())[0];
    const done = transition(stepMachine, ready, stepSucceeded())[0];
    const events = [
      stepCreated(),
      stepReady(),
      stepStarved(),
      stepServed(),
      stepBlocked(),
      stepSucceeded(),
    ];
    for (const snap of [waiting, ready, starved, blocked, done]) {
      for (const event of events) {
        const got = fast.next(toSnap(snap), event);
        expect(got === null, `${event.type} in ${String(snap.value)}`).toBe(!snap.can(event));
      }
    }
  });
});

describe('createTransitioner on guards it can and cannot run', () => {
  type Ev = { type: 'GO'; n: number };
  const gated = (guard: unknown) =>
    setup({
      types: { context: {} as { limit: number }, events: {} as Ev },
      guards: {
        below: ({ event }, params: { max: number }) => event.n < params.max,
      },
    }).createMachine({
      id: 'gated',
      context: { limit: 5 },
      initial: 'idle',
      states: {
        idle: { on: { GO: { guard: guard as never, target: 'done' } } },
        done: { type: 'final' },
      },
    });

  it('passes a guard its params, as a value or a function of the args, as XState does', () => {
    for (const params of [
      { max: 5 },
      ({ context }: { context: { limit: number } }) => ({ max: context.limit }),
    ]) {
      const machine = gated({ type: 'below', params });
      const t = createTransitioner(machine);
      const [snap] = t.initial(undefined);
      for (const n of [3, 7]) {
        const fast = t.next(snap, { type: 'GO', n })?.[0].value ?? 'refused';
        const [real] = transition(machine, machine.resolveState(snap as never), { type: 'GO', n });
        expect(fast).toBe(real.value === 'done' ? 'done' : 'refused');
      }
      expect(t.next(snap, { type: 'GO', n: 3 })?.[0].value).toBe('done');
      expect(t.next(snap, { type: 'GO', n: 7 })).toBeNull();
    }
  });

  it('refuses the guard combinators instead of calling them', () => {
    for (const guard of [and(['below']), or(['below']), not('below'), stateIn('idle')]) {
      expect(() => createTransitioner(gated(guard))).toThrow(/gated: guard .* cannot be compiled/);
    }
  });
});
