import { describe, it, expect } from 'vitest';
import { initialTransition } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { taskMachine } from '../../actors/task/task.machine.js';
import type { TaskState } from '../../actors/task/task.machine.js';
import type { TaskEvent } from '../../actors/task/task.events.js';
import {
  T0,
  at,
  hexHash,
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
} from '../helpers/event-builders.js';
import { expectLanded, machineHarness } from '../helpers/unit-machine-harness.js';

type Snap = SnapshotFrom<typeof taskMachine>;
type TaskEventType = TaskEvent['type'];

const create = (over: Parameters<typeof taskCreated>[0] = {}): Snap =>
  initialTransition(taskMachine, taskCreated(over))[0];

const harness = machineHarness(taskMachine);
const { accept, expectRefused } = harness;

/** Folds `events` from a fresh task (or `from`), each of which must be accepted. */
const fold = (events: TaskEvent[], from: Snap = create()): Snap => harness.fold(events, from);

/** Asserts the task is in `state` after `history`, and that it refuses `event` there. */
function expectRefusedIn(state: TaskState, history: TaskEvent[], event: TaskEvent): void {
  const snap = fold(history);
  expect(snap.value).toBe(state);
  expectRefused(snap, event);
}

// Attempt 1 is a1, dispatched to `linux`, started by w1.
const published = [taskPublished({}, at(1))];
const running = [...published, taskStarted({}, at(2))];
const finalizing = [...running, taskResultAccepted({}, at(3))];
const poisoned = [...finalizing, taskPoisoned({}, at(4))];

/** Attempt 1 lost with its worker, attempt 2 (a2, tag `gpu`) current: a1 is stale. */
const secondAttempt = [
  ...running,
  taskRequeued({ reason: 'worker-lost' }, at(10)),
  taskPublished({ attempt: 2, tag: 'gpu' }, at(11)),
];

/** Attempt 2 started, then past its result, then poisoned, the same way: a1 is stale. */
const runningA2 = [...secondAttempt, taskStarted({ attemptId: 'a2' })];
const finalizingA2 = [...runningA2, taskResultAccepted({ attemptId: 'a2' })];
const poisonedA2 = [...finalizingA2, taskPoisoned({ attemptId: 'a2' })];

/** What a task holds of an attempt when it has none: new, or back in Pending. */
const NO_ATTEMPT = { attemptId: null, tokenHash: null, tag: null, workerId: null } as const;

/** One path into every state. */
const pathTo: Record<TaskState, TaskEvent[]> = {
  Pending: [],
  Published: published,
  Running: running,
  Finalizing: finalizing,
  Poisoned: poisoned,
  Succeeded: [...finalizing, taskFinalized({}, at(4))],
  Failed: [...running, taskAttemptFailed({ retryable: false }, at(3))],
  Dead: [...running, taskDead({ recoveries: 1 }, at(3))],
  Cancelled: [taskCancelled({}, at(1))],
};

/** The attempt an event for `snap` names: the current one (a1 before the first publish). */
const current = (snap: Snap): string => snap.context.attemptId ?? 'a1';

/** The most plausible event of each type for `snap`: the current attempt, the next publish. */
const PLAUSIBLE: Record<TaskEventType, (snap: Snap) => TaskEvent> = {
  TaskCreated: () => taskCreated(),
  TaskPublished: (snap) => taskPublished({ attempt: snap.context.attempt + 1 }),
  TaskStarted: (snap) => taskStarted({ attemptId: current(snap) }),
  TaskRequeued: (snap) => taskRequeued({ attemptId: current(snap) }),
  TaskAttemptFailed: (snap) => taskAttemptFailed({ attemptId: current(snap) }),
  TaskResultAccepted: (snap) => taskResultAccepted({ attemptId: current(snap) }),
  TaskFinalized: (snap) => taskFinalized({ attemptId: current(snap) }),
  TaskPoisoned: (snap) => taskPoisoned({ attemptId: current(snap) }),
  TaskFinalizeRetried: (snap) => taskFinalizeRetried({ attemptId: current(snap) }),
  TaskDead: () => taskDead(),
  TaskCancelled: () => taskCancelled(),
};

/** DESIGN.md section 3: every accepted (state, event) pair, with its target and actions. */
const ACCEPTED: Record<TaskState, Partial<Record<TaskEventType, [TaskState, string[]?]>>> = {
  Pending: { TaskPublished: ['Published'], TaskCancelled: ['Cancelled'] },
  Published: {
    TaskStarted: ['Running'],
    TaskRequeued: ['Pending'],
    TaskDead: ['Dead'],
    TaskCancelled: ['Cancelled'],
  },
  Running: {
    TaskRequeued: ['Pending'],
    TaskAttemptFailed: ['Pending'],
    TaskResultAccepted: ['Finalizing', ['enqueueFinalization']],
    TaskDead: ['Dead'],
    TaskCancelled: ['Cancelled'],
  },
  Finalizing: {
    TaskFinalized: ['Succeeded'],
    TaskPoisoned: ['Poisoned'],
    TaskCancelled: ['Cancelled'],
  },
  Poisoned: {
    TaskFinalizeRetried: ['Finalizing', ['enqueueFinalization']],
    TaskCancelled: ['Cancelled'],
  },
  Succeeded: {},
  Failed: {},
  Dead: {},
  Cancelled: {},
};

/** The (state x event) matrix for one state: every event type is accepted or refused. */
const matrix = harness.eventMatrix({
  events: PLAUSIBLE,
  snapshotOf: Object.fromEntries(
    Object.entries(pathTo).map(([state, events]) => [state, () => fold(events)]),
  ) as Record<TaskState, () => Snap>,
  accepted: ACCEPTED,
  rowIsState: 'all',
});

describe('taskMachine', () => {
  describe('TaskCreated (initial transition)', () => {
    it('starts Pending with no attempt, no failures and no recoveries', () => {
      const [snap, actions] = initialTransition(
        taskMachine,
        taskCreated({ command: ['sh', '-c', 'echo hi'], input: { n: 1 }, maxAttempts: 5 }),
      );
      expect(snap.value).toBe('Pending');
      expect(snap.status).toBe('active');
      expect(actions).toEqual([]);
      expect(snap.context).toMatchObject({
        spec: {
          runId: 'r1',
          stepId: 's1',
          taskId: 't1',
          tags: ['linux'],
          command: ['sh', '-c', 'echo hi'],
          input: { n: 1 },
          maxAttempts: 5,
        },
        attempt: 0,
        ...NO_ATTEMPT,
        failures: 0,
        retryAt: null,
        recoveries: 0,
        recoveredAt: [],
        since: null,
        output: null,
        resultKey: null,
        error: null,
        finalizeRound: 0,
        queuedAt: T0,
      });
    });

    it('takes its own priority, and resolves delayMs from its own time into retryAt', () => {
      const [snap] = initialTransition(
        taskMachine,
        taskCreated({ priority: -5, delayMs: 2_500 }, at(10)),
      );
      expect(snap.context.spec).toMatchObject({ priority: -5, delayMs: 2_500 });
      expect(snap.context.retryAt).toBe(at(12.5));
      expect(snap.context.queuedAt).toBe(at(10));
    });

    it('takes notBefore as given, in UTC', () => {
      const [snap] = initialTransition(
        taskMachine,
        taskCreated({ notBefore: '2026-01-01T01:00:00-01:00' }),
      );
      expect(snap.context.retryAt).toBe('2026-01-01T02:00:00.000Z');
    });
  });

  describe('Pending', () => {
    matrix('Pending');

    it('TaskPublished with attempt 1 records the attempt, token hash, tag and time', () => {
      const event = taskPublished({ attempt: 1, attemptId: 'a1', tag: 'linux' }, at(5));
      expectLanded(accept(create(), event), {
        value: 'Published',
        actions: [],
        context: {
          attempt: 1,
          attemptId: 'a1',
          tokenHash: hexHash('a1'),
          tag: 'linux',
          workerId: null,
          since: at(5),
          retryAt: null,
        },
      });
    });

    it.each([0, 2, 3])('TaskPublished with attempt %i on a new task is refused', (attempt) => {
      expectRefused(create(), taskPublished({ attempt }));
    });

    it('TaskPublished after a requeue must be attempt previous+1', () => {
      const snap = fold([...running, taskRequeued({ reason: 'publish-timeout', recoveries: 0 })]);
      expect(snap.value).toBe('Pending');
      expect(snap.context.attempt).toBe(1);
      expectRefused(snap, taskPublished({ attempt: 1, attemptId: 'a1b' }));
      expectRefused(snap, taskPublished({ attempt: 3 }));
      const { next } = accept(snap, taskPublished({ attempt: 2 }));
      expect(next.context).toMatchObject({ attempt: 2, attemptId: 'a2' });
    });

    it('TaskPublished after a retryable failure clears retryAt', () => {
      const snap = fold([...running, taskAttemptFailed({ retryAt: at(60) }, at(3))]);
      expect(snap.context.retryAt).toBe(at(60));
      const { next } = accept(snap, taskPublished({ attempt: 2 }, at(61)));
      expect(next.context.retryAt).toBeNull();
    });

    it('TaskCancelled -> Cancelled with the reason recorded and no attempt', () => {
      expectLanded(accept(create(), taskCancelled({ reason: 'run cancelled' })), {
        value: 'Cancelled',
        status: 'done',
        actions: [],
        context: {
          attempt: 0,
          attemptId: null,
          tag: null,
          workerId: null,
          error: 'cancelled: run cancelled',
        },
      });
    });

    it('TaskDead is refused: a death replaces a return to Pending, from Published or Running', () => {
      const back = fold([...running, taskRequeued({ reason: 'operator', recoveries: 0 })]);
      expectRefused(back, taskDead());
    });
  });

  describe('Published', () => {
    matrix('Published');

    it('TaskStarted for the current attempt -> Running, recording the worker and the time', () => {
      expectLanded(
        accept(fold(published), taskStarted({ attemptId: 'a1', workerId: 'w7' }, at(9))),
        {
          value: 'Running',
          actions: [],
          context: {
            attempt: 1,
            attemptId: 'a1',
            tag: 'linux',
            workerId: 'w7',
            since: at(9),
          },
        },
      );
    });

    it('TaskStarted with a stale attemptId is refused', () => {
      expectRefusedIn('Published', secondAttempt, taskStarted({ attemptId: 'a1' }));
    });

    it('TaskStarted with an unknown attemptId is refused', () => {
      expectRefused(fold(published), taskStarted({ attemptId: 'zzz' }));
    });

    it('TaskRequeued (publish-timeout) -> Pending: clears the attempt, keeps the count, is not counted', () => {
      expectLanded(
        accept(
          fold(published),
          taskRequeued({ reason: 'publish-timeout', recoveries: 0 }, at(700)),
        ),
        {
          value: 'Pending',
          context: {
            attempt: 1,
            ...NO_ATTEMPT,
            since: null,
            recoveries: 0,
            recoveredAt: [],
            failures: 0,
          },
        },
      );
    });

    it('TaskRequeued with a stale attemptId is refused', () => {
      expectRefused(fold(secondAttempt), taskRequeued({ attemptId: 'a1' }));
    });

    it('TaskDead -> Dead: counted as a recovery, keeps the attempt and its tag', () => {
      expectLanded(accept(fold(published), taskDead({ recoveries: 1 }, at(20))), {
        value: 'Dead',
        context: {
          attempt: 1,
          attemptId: 'a1',
          tag: 'linux',
          workerId: null,
          recoveries: 1,
          recoveredAt: [at(20)],
          error: 'dead: recovery-limit',
        },
      });
    });

    it('TaskCancelled -> Cancelled keeps the attempt values', () => {
      expectLanded(accept(fold(published), taskCancelled()), {
        value: 'Cancelled',
        context: { attempt: 1, attemptId: 'a1', tag: 'linux' },
      });
    });
  });

  describe('Running', () => {
    matrix('Running');

    it('TaskRequeued (worker-lost) -> Pending: counted, its time recorded, the attempt cleared', () => {
      expectLanded(
        accept(fold(running), taskRequeued({ reason: 'worker-lost', recoveries: 1 }, at(30))),
        {
          value: 'Pending',
          actions: [],
          context: {
            attempt: 1,
            ...NO_ATTEMPT,
            since: null,
            output: null,
            recoveries: 1,
            recoveredAt: [at(30)],
            failures: 0,
          },
        },
      );
    });

    it.each(['publish-timeout', 'worker-released', 'operator'] as const)(
      'TaskRequeued (%s) -> Pending is not counted as a recovery',
      (reason) => {
        expectLanded(accept(fold(running), taskRequeued({ reason, recoveries: 0 }, at(30))), {
          value: 'Pending',
          context: {
            attemptId: null,
            tag: null,
            workerId: null,
            recoveries: 0,
            recoveredAt: [],
          },
        });
      },
    );

    it('recoveries count worker-lost only, over the whole life of the task', () => {
      const snap = fold([
        ...running,
        taskRequeued({ attemptId: 'a1', reason: 'worker-lost' }, at(10)),
        taskPublished({ attempt: 2 }, at(11)),
        taskStarted({ attemptId: 'a2' }, at(12)),
        taskRequeued({ attemptId: 'a2', reason: 'worker-released', recoveries: 1 }, at(20)),
        taskPublished({ attempt: 3 }, at(21)),
        taskRequeued({ attemptId: 'a3', reason: 'publish-timeout' }, at(30)),
        taskPublished({ attempt: 4 }, at(31)),
        taskStarted({ attemptId: 'a4' }, at(32)),
        taskRequeued({ attemptId: 'a4', reason: 'worker-lost', recoveries: 2 }, at(40)),
      ]);
      expect(snap.value).toBe('Pending');
      expect(snap.context).toMatchObject({
        attempt: 4,
        recoveries: 2,
        recoveredAt: [at(10), at(40)],
        failures: 0,
      });
    });

    it('TaskRequeued with a stale attemptId is refused', () => {
      expectRefusedIn('Running', runningA2, taskRequeued({ attemptId: 'a1' }));
    });

    it('TaskAttemptFailed (retryable, failures < maxAttempts) -> Pending with retryAt', () => {
      expectLanded(
        accept(
          fold(running),
          taskAttemptFailed({ exitCode: 2, error: 'boom', retryAt: at(5) }, at(4)),
        ),
        {
          value: 'Pending',
          actions: [],
          context: {
            attempt: 1,
            ...NO_ATTEMPT,
            failures: 1,
            retryAt: at(5),
            queuedAt: at(4),
            error: 'boom',
            recoveries: 0,
          },
        },
      );
    });

    it('TaskAttemptFailed without retryAt leaves retryAt null', () => {
      const { next } = accept(fold(running), taskAttemptFailed({ retryAt: undefined }));
      expect(next.value).toBe('Pending');
      expect(next.context.retryAt).toBeNull();
    });

    it('TaskAttemptFailed that uses up maxAttempts -> Failed, keeping the last attempt', () => {
      const snap = fold([
        ...running,
        taskAttemptFailed({ attemptId: 'a1' }, at(3)),
        taskPublished({ attempt: 2 }, at(4)),
        taskStarted({ attemptId: 'a2', workerId: 'w2' }, at(5)),
        taskAttemptFailed({ attemptId: 'a2', workerId: 'w2' }, at(6)),
        taskPublished({ attempt: 3, tag: 'gpu' }, at(7)),
        taskStarted({ attemptId: 'a3', workerId: 'w3' }, at(8)),
      ]);
      expect(snap.context.failures).toBe(2);
      expectLanded(
        accept(snap, taskAttemptFailed({ attemptId: 'a3', workerId: 'w3', error: 'third' }, at(9))),
        {
          value: 'Failed',
          status: 'done',
          actions: [],
          context: {
            attempt: 3,
            attemptId: 'a3',
            tag: 'gpu',
            workerId: 'w3',
            failures: 3,
            error: 'third',
          },
        },
      );
    });

    it('maxAttempts counts TaskAttemptFailed only: recoveries do not use up attempts', () => {
      const snap = fold(
        [
          ...running,
          taskRequeued({ attemptId: 'a1', reason: 'worker-lost' }),
          taskPublished({ attempt: 2 }),
          taskStarted({ attemptId: 'a2' }),
          taskRequeued({ attemptId: 'a2', reason: 'worker-lost', recoveries: 2 }),
          taskPublished({ attempt: 3 }),
          taskStarted({ attemptId: 'a3' }),
          taskAttemptFailed({ attemptId: 'a3' }),
          taskPublished({ attempt: 4 }),
          taskStarted({ attemptId: 'a4' }),
        ],
        create({ maxAttempts: 2 }),
      );
      expect(snap.value).toBe('Running');
      expect(snap.context).toMatchObject({ attempt: 4, failures: 1, recoveries: 2 });
      expectLanded(accept(snap, taskAttemptFailed({ attemptId: 'a4' })), {
        value: 'Failed',
        context: { attempt: 4, failures: 2, attemptId: 'a4' },
      });
    });

    it('TaskAttemptFailed with maxAttempts 1 -> Failed at the first failure', () => {
      const { next } = accept(fold(running, create({ maxAttempts: 1 })), taskAttemptFailed());
      expect(next.value).toBe('Failed');
      expect(next.context.failures).toBe(1);
    });

    it('TaskAttemptFailed with retryable:false -> Failed at once', () => {
      expectLanded(
        accept(fold(running), taskAttemptFailed({ retryable: false, error: 'bad input' })),
        {
          value: 'Failed',
          context: {
            failures: 1,
            spec: { maxAttempts: 3 },
            attemptId: 'a1',
            tag: 'linux',
            workerId: 'w1',
            error: 'bad input',
          },
        },
      );
    });

    it('TaskAttemptFailed records the workerId, it does not match it', () => {
      const { next } = accept(
        fold(running),
        taskAttemptFailed({ workerId: 'w9', retryable: false }),
      );
      expect(next.context.workerId).toBe('w9');
    });

    it.each([true, false])(
      'TaskAttemptFailed with a stale attemptId (retryable %s) is refused',
      (retryable) => {
        const snap = fold(runningA2);
        expectRefused(snap, taskAttemptFailed({ attemptId: 'a1', retryable }));
      },
    );

    it('TaskResultAccepted -> Finalizing and asks for enqueueFinalization', () => {
      expectLanded(
        accept(
          fold(running),
          taskResultAccepted(
            { workerId: 'w1', outputRef: 'r1/t1/a1', outputBytes: 2048, outputInline: undefined },
            at(7),
          ),
        ),
        {
          value: 'Finalizing',
          actions: ['enqueueFinalization'],
          context: {
            attemptId: 'a1',
            tag: 'linux',
            workerId: 'w1',
            since: at(7),
            output: { ref: 'r1/t1/a1', bytes: 2048, inline: null },
          },
        },
      );
    });

    it('TaskResultAccepted keeps an inline output for the finalizer', () => {
      const { next } = accept(fold(running), taskResultAccepted({ outputInline: 'aGk=' }));
      expect(next.context.output).toEqual({ ref: 'inline', bytes: 11, inline: 'aGk=' });
    });

    it('TaskResultAccepted with a stale attemptId is refused', () => {
      const snap = fold(runningA2);
      expectRefused(snap, taskResultAccepted({ attemptId: 'a1' }));
    });

    it('TaskDead -> Dead: the counted recovery that hits the limit, attempt values kept', () => {
      const snap = fold([
        ...running,
        taskRequeued({ attemptId: 'a1', reason: 'worker-lost' }, at(10)),
        taskPublished({ attempt: 2 }, at(11)),
        taskStarted({ attemptId: 'a2', workerId: 'w2' }, at(12)),
        taskRequeued({ attemptId: 'a2', reason: 'worker-lost', recoveries: 2 }, at(20)),
        taskPublished({ attempt: 3 }, at(21)),
        taskStarted({ attemptId: 'a3', workerId: 'w3' }, at(22)),
      ]);
      expectLanded(accept(snap, taskDead({ recoveries: 3 }, at(30))), {
        value: 'Dead',
        status: 'done',
        actions: [],
        context: {
          attempt: 3,
          attemptId: 'a3',
          tag: 'linux',
          workerId: 'w3',
          recoveries: 3,
          recoveredAt: [at(10), at(20), at(30)],
          error: 'dead: recovery-limit',
        },
      });
    });

    it('TaskCancelled -> Cancelled keeps the attempt values', () => {
      expectLanded(accept(fold(running), taskCancelled({ reason: 'run cancelled' })), {
        value: 'Cancelled',
        context: {
          attempt: 1,
          attemptId: 'a1',
          tag: 'linux',
          workerId: 'w1',
          error: 'cancelled: run cancelled',
        },
      });
    });
  });

  describe('Finalizing', () => {
    matrix('Finalizing');

    it('TaskFinalized -> Succeeded: records the result key, drops the inline output', () => {
      const snap = fold(finalizing);
      expect(snap.context.output?.inline).toBe('eyJvayI6dHJ1ZX0=');
      expectLanded(accept(snap, taskFinalized({ resultKey: 'r1.t1' })), {
        value: 'Succeeded',
        status: 'done',
        actions: [],
        context: {
          attempt: 1,
          attemptId: 'a1',
          tag: 'linux',
          workerId: 'w1',
          resultKey: 'r1.t1',
          output: { ref: 'inline', bytes: 11, inline: null },
        },
      });
    });

    it('TaskFinalized with a stale attemptId is refused', () => {
      expectRefusedIn('Finalizing', finalizingA2, taskFinalized({ attemptId: 'a1' }));
    });

    it('TaskPoisoned -> Poisoned: keeps the error and the output for a retry', () => {
      expectLanded(accept(fold(finalizing), taskPoisoned({ error: 'output is not valid JSON' })), {
        value: 'Poisoned',
        status: 'active',
        actions: [],
        context: {
          attemptId: 'a1',
          error: 'output is not valid JSON',
          output: { ref: 'inline', bytes: 11, inline: 'eyJvayI6dHJ1ZX0=' },
        },
      });
    });

    it('TaskPoisoned with a stale attemptId is refused', () => {
      expectRefused(fold(finalizingA2), taskPoisoned({ attemptId: 'a1' }));
    });

    it('TaskCancelled -> Cancelled keeps the attempt values', () => {
      expectLanded(accept(fold(finalizing), taskCancelled()), {
        value: 'Cancelled',
        context: { attemptId: 'a1', tag: 'linux', workerId: 'w1' },
      });
    });
  });

  describe('Poisoned', () => {
    matrix('Poisoned');

    it('TaskFinalizeRetried -> Finalizing: a new round, error cleared, enqueueFinalization', () => {
      expectLanded(accept(fold(poisoned), taskFinalizeRetried({ by: 'alice' })), {
        value: 'Finalizing',
        actions: ['enqueueFinalization'],
        context: { finalizeRound: 1, error: null, attemptId: 'a1' },
      });
    });

    it('a second operator retry is round 2', () => {
      const snap = fold([...poisoned, taskFinalizeRetried(), taskPoisoned()]);
      const { next } = accept(snap, taskFinalizeRetried());
      expect(next.context.finalizeRound).toBe(2);
    });

    it('TaskFinalizeRetried with a stale attemptId is refused', () => {
      expectRefusedIn('Poisoned', poisonedA2, taskFinalizeRetried({ attemptId: 'a1' }));
    });

    it('TaskCancelled -> Cancelled ends a held task, keeping the attempt values', () => {
      expectLanded(accept(fold(poisoned), taskCancelled({ reason: 'operator' })), {
        value: 'Cancelled',
        status: 'done',
        context: { attemptId: 'a1', tag: 'linux', workerId: 'w1' },
      });
    });
  });

  describe.each(['Succeeded', 'Failed', 'Dead', 'Cancelled'] as const)('%s', (state) => {
    matrix(state);

    it('is final', () => {
      expect(fold(pathTo[state]).status).toBe('done');
    });
  });
});
