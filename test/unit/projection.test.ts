import { describe, it, expect } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { IllegalTransitionError, isSonarError } from '../../actors/errors.js';
import { decodeEvent, parseEventSubject } from '../../actors/events.js';
import type { SonarEvent } from '../../actors/events.js';
import { applyDecoded, applyEvent, createProjection, evaluate } from '../../actors/projection.js';
import type { EventRecord, Projection } from '../../actors/projection.js';
import { taskMachine } from '../../actors/task/task.machine.js';
import {
  T0,
  at,
  hexHash,
  line,
  reconcilerElected,
  runExpired,
  runFailed,
  runSubmitted,
  runSucceeded,
  stepSucceeded,
  workerDraining,
  workerExpired,
  workerLeft,
  workerLost,
  stepCreated,
  subject,
  taskCancelled,
  taskCreated,
  taskFinalized,
  taskPoisoned,
  taskPublished,
  taskRequeued,
  taskResultAccepted,
  taskStarted,
  workerJoined,
} from '../helpers/event-builders.js';

const record = (seq: number, subj: string, event: SonarEvent): EventRecord =>
  line(seq, subj, event);

/** Workers w1, w2 and w3 joining at seq 1, 2 and 3. */
const threeWorkersJoined = (): EventRecord[] =>
  ['w1', 'w2', 'w3'].map((id, i) =>
    record(i + 1, subject.worker(id), workerJoined({ workerId: id })),
  );

/** Applies records that must all be accepted. */
function applyAll(p: Projection, records: EventRecord[]): void {
  for (const r of records) {
    const outcome = applyEvent(p, r);
    expect(outcome, `seq ${r.seq} ${String(r.type)}`).toMatchObject({ ok: true });
  }
}

/** The parts of a projection a refused event must not touch (everything but lastSeq). */
function stateOf(p: Projection): unknown {
  return {
    tasks: [...p.tasks].map(([k, a]) => [k, a.seq, a.snapshot]),
    steps: [...p.steps].map(([k, a]) => [k, a.seq, a.snapshot]),
    runs: [...p.runs].map(([k, a]) => [k, a.seq, a.snapshot]),
    workers: [...p.workers].map(([k, a]) => [k, a.seq, a.snapshot]),
    stepTasks: [...p.stepTasks].map(([k, v]) => [k, [...v]]),
    tasksByState: Object.entries(p.tasksByState).map(([k, v]) => [k, [...v]]),
    stepIndex: [...p.stepIndex.keys()],
    activeSteps: [...p.activeSteps],
    expiredRuns: [...p.expiredRuns],
    workersInService: [...p.workersInService],
    leader: p.leader,
  };
}

/** Asserts `r` is refused, with `reason` in the message, and changes nothing but lastSeq. */
function expectRefused(p: Projection, r: EventRecord, reason: string | RegExp): void {
  const before = stateOf(p);
  const lastSeq = p.lastSeq;
  const snapshots = [...p.tasks.values()].map((a) => a.snapshot);
  const outcome = applyEvent(p, r);
  expect(outcome.ok).toBe(false);
  if (!outcome.ok) expect(outcome.reason).toMatch(reason);
  expect(stateOf(p)).toEqual(before);
  [...p.tasks.values()].forEach((a, i) => expect(a.snapshot).toBe(snapshots[i]));
  // A refused event still moves the read position, so the live loop resumes after it.
  expect(p.lastSeq).toBe(Math.max(r.seq, lastSeq));
}

const openSets = (p: Projection): Record<string, string[]> =>
  Object.fromEntries(Object.entries(p.tasksByState).map(([k, v]) => [k, [...v].sort()]));

describe('projection', () => {
  describe('createProjection', () => {
    it('starts empty with no leader at sequence 0', () => {
      const p = createProjection();
      expect(p.tasks.size + p.steps.size + p.runs.size + p.workers.size).toBe(0);
      expect(p.leader).toBeNull();
      expect(p.lastSeq).toBe(0);
      expect(openSets(p)).toEqual({
        Pending: [],
        Published: [],
        Running: [],
        Finalizing: [],
        Poisoned: [],
      });
    });
  });

  describe('applyEvent: creation', () => {
    it.each([
      ['TaskCreated', subject.task('r1', 't1'), taskCreated()],
      ['StepCreated', subject.step('r1', 's1'), stepCreated()],
      ['RunSubmitted', subject.run('r1'), runSubmitted()],
      ['WorkerJoined', subject.worker('w1'), workerJoined()],
    ] as const)('%s on its own subject creates the aggregate', (_type, subj, event) => {
      const p = createProjection();
      const outcome = applyEvent(p, record(7, subj, event));
      expect(outcome).toMatchObject({ ok: true, from: null, actions: [] });
      const table = { task: p.tasks, step: p.steps, run: p.runs, worker: p.workers }[
        parseEventSubject(subj)!.kind as 'task' | 'step' | 'run' | 'worker'
      ];
      const key = parseEventSubject(subj)!.key;
      expect(table.get(key)?.seq).toBe(7);
      expect(p.lastSeq).toBe(7);
    });

    it('TaskCreated gives the same snapshot as the public initialTransition()', () => {
      const p = createProjection();
      const event = taskCreated({ command: ['sh', '-c', 'true'], input: { n: 1 }, maxAttempts: 4 });
      applyAll(p, [record(1, subject.task(), event)]);
      const fast = taskMachine.resolveState(p.tasks.get('r1.t1')!.snapshot);
      const [slow] = initialTransition(taskMachine, event);
      expect(fast.value).toBe(slow.value);
      expect(fast.status).toBe(slow.status);
      expect(fast.context).toEqual(slow.context);
      expect(taskMachine.getPersistedSnapshot(fast)).toEqual(
        taskMachine.getPersistedSnapshot(slow),
      );
      for (const next of [taskPublished(), taskCancelled(), taskStarted()]) {
        expect(fast.can(next)).toBe(slow.can(next));
      }
      const [afterFast] = transition(taskMachine, fast, taskPublished());
      const [afterSlow] = transition(taskMachine, slow, taskPublished());
      expect(afterFast.context).toEqual(afterSlow.context);
    });

    it.each([
      ['TaskCreated, other task', subject.task('r1', 't2'), taskCreated({ taskId: 't1' })],
      ['TaskCreated, other run', subject.task('r2', 't1'), taskCreated({ runId: 'r1' })],
      ['TaskCreated on a step subject', subject.step('r1', 't1'), taskCreated()],
      ['StepCreated, other step', subject.step('r1', 's2'), stepCreated({ stepId: 's1' })],
      ['RunSubmitted, other run', subject.run('r2'), runSubmitted({ runId: 'r1' })],
      ['RunSubmitted on a worker subject', subject.worker('r1'), runSubmitted({ runId: 'r1' })],
      ['WorkerJoined, other worker', subject.worker('w2'), workerJoined({ workerId: 'w1' })],
    ] as const)('%s: the creation key must match the subject', (_name, subj, event) => {
      const p = createProjection();
      expectRefused(p, record(1, subj, event), /subject key/);
      expect(p.tasks.size + p.steps.size + p.runs.size + p.workers.size).toBe(0);
    });

    it('a duplicate creation is refused and the first one stands', () => {
      const p = createProjection();
      applyAll(p, [
        record(1, subject.task(), taskCreated({ tags: ['linux'] })),
        record(2, subject.task(), taskPublished()),
      ]);
      const first = p.tasks.get('r1.t1')!.snapshot;
      expectRefused(
        p,
        record(3, subject.task(), taskCreated({ tags: ['gpu'] })),
        'task: TaskCreated is not accepted in state "Published"',
      );
      expect(p.tasks.get('r1.t1')!.snapshot).toBe(first);
      expect(p.tasks.get('r1.t1')!.seq).toBe(2);
      expect(p.stepTasks.get('r1.s1')).toEqual(['r1.t1']);
    });

    it.each([
      ['StepCreated', subject.step(), stepCreated()],
      ['RunSubmitted', subject.run(), runSubmitted()],
      ['WorkerJoined', subject.worker(), workerJoined()],
    ] as const)('a duplicate %s is refused', (_type, subj, event) => {
      const p = createProjection();
      applyAll(p, [record(1, subj, event)]);
      expectRefused(p, record(2, subj, event), /is not accepted in state/);
    });
  });

  describe('applyEvent: refused events', () => {
    it('an event for an aggregate that does not exist is refused', () => {
      expectRefused(
        createProjection(),
        record(1, subject.task(), taskStarted()),
        'task: TaskStarted is not accepted in state "none"',
      );
    });

    it('an event the machine refuses leaves the projection unchanged but moves lastSeq', () => {
      const p = createProjection();
      applyAll(p, [
        record(1, subject.task(), taskCreated()),
        record(2, subject.task(), taskPublished()),
      ]);
      expectRefused(
        p,
        record(3, subject.task(), taskStarted({ attemptId: 'stale' })),
        'task: TaskStarted is not accepted in state "Published"',
      );
      expect(p.lastSeq).toBe(3);
      expect(p.tasks.get('r1.t1')!.seq).toBe(2);
      expect(openSets(p).Published).toEqual(['r1.t1']);
    });

    it('an event of another aggregate kind is refused', () => {
      const p = createProjection();
      applyAll(p, [record(1, subject.step(), stepCreated())]);
      expectRefused(p, record(2, subject.step(), taskCancelled()), /step: TaskCancelled/);
    });

    it('a subject that is not an event subject is refused', () => {
      expectRefused(
        createProjection(),
        record(1, 'sonar.dispatch.linux', taskCreated()),
        'not an event subject: "sonar.dispatch.linux"',
      );
    });

    it('an event that cannot be decoded is refused with the decode error', () => {
      const p = createProjection();
      const outcome = applyEvent(p, {
        seq: 4,
        subject: subject.task(),
        time: at(0),
        type: 'TaskExploded',
        data: {},
      });
      expect(outcome).toEqual({ ok: false, reason: 'unknown event type "TaskExploded"' });
      expect(p.lastSeq).toBe(4);
    });

    it('an event of an unknown version is refused', () => {
      const outcome = applyEvent(createProjection(), {
        ...record(1, subject.task(), taskCreated()),
        v: 2,
      });
      expect(outcome).toEqual({ ok: false, reason: 'unsupported event version 2' });
    });

    it('lastSeq never goes back', () => {
      const p = createProjection();
      applyAll(p, [record(10, subject.task(), taskCreated())]);
      applyAll(p, [record(5, subject.task(), taskPublished())]);
      expect(p.lastSeq).toBe(10);
      expect(p.tasks.get('r1.t1')!.seq).toBe(5);
    });
  });

  describe('tasksByState', () => {
    it('follows a task through every open state and drops it when it ends', () => {
      const p = createProjection();
      const steps: [SonarEvent, string | null][] = [
        [taskCreated(), 'Pending'],
        [taskPublished(), 'Published'],
        [taskStarted(), 'Running'],
        [taskRequeued({ reason: 'worker-lost' }), 'Pending'],
        [taskPublished({ attempt: 2 }), 'Published'],
        [taskStarted({ attemptId: 'a2' }), 'Running'],
        [taskResultAccepted({ attemptId: 'a2' }), 'Finalizing'],
        [taskPoisoned({ attemptId: 'a2' }), 'Poisoned'],
        [taskCancelled(), null],
      ];
      steps.forEach(([event, state], i) => {
        applyAll(p, [record(i + 1, subject.task(), event)]);
        const sets = openSets(p);
        for (const [name, keys] of Object.entries(sets)) {
          expect(keys, name).toEqual(name === state ? ['r1.t1'] : []);
        }
      });
      expect(p.tasks.get('r1.t1')!.snapshot.value).toBe('Cancelled');
    });

    it('holds many tasks at once and drops a succeeded one', () => {
      const p = createProjection();
      applyAll(p, [
        record(1, subject.task('r1', 't1'), taskCreated({ taskId: 't1' })),
        record(2, subject.task('r1', 't2'), taskCreated({ taskId: 't2' })),
        record(3, subject.task('r1', 't3'), taskCreated({ taskId: 't3' })),
        record(4, subject.task('r1', 't1'), taskPublished()),
        record(5, subject.task('r1', 't2'), taskPublished()),
        record(6, subject.task('r1', 't2'), taskStarted()),
        record(7, subject.task('r1', 't2'), taskResultAccepted()),
        record(8, subject.task('r1', 't2'), taskFinalized()),
      ]);
      expect(openSets(p)).toEqual({
        Pending: ['r1.t3'],
        Published: ['r1.t1'],
        Running: [],
        Finalizing: [],
        Poisoned: [],
      });
    });
  });

  describe('stepTasks', () => {
    it('lists each step’s tasks in TaskCreated order, once', () => {
      const p = createProjection();
      const create = (seq: number, stepId: string, taskId: string): EventRecord =>
        record(seq, subject.task('r1', taskId), taskCreated({ stepId, taskId }));
      applyAll(p, [create(1, 's1', 't3'), create(2, 's2', 't9'), create(3, 's1', 't1')]);
      applyAll(p, [create(4, 's1', 't2')]);
      expectRefused(p, create(5, 's1', 't1'), /TaskCreated is not accepted/);
      expect([...p.stepTasks]).toEqual([
        ['r1.s1', ['r1.t3', 'r1.t1', 'r1.t2']],
        ['r1.s2', ['r1.t9']],
      ]);
    });
  });

  describe('leader', () => {
    it('is set by ReconcilerElected on a system subject, the latest one wins', () => {
      const p = createProjection();
      const first = applyEvent(
        p,
        record(3, subject.system(), reconcilerElected({ nodeId: 'n1' }, at(1))),
      );
      expect(first).toMatchObject({ ok: true, from: null, to: 'Elected', actions: [] });
      expect(p.leader).toEqual({ nodeId: 'n1', time: at(1), seq: 3 });
      applyAll(p, [record(9, subject.system(), reconcilerElected({ nodeId: 'n2' }, at(20)))]);
      expect(p.leader).toEqual({ nodeId: 'n2', time: at(20), seq: 9 });
      expect(p.lastSeq).toBe(9);
    });

    it('another event on a system subject is refused', () => {
      expectRefused(
        createProjection(),
        record(1, subject.system(), taskCreated()),
        'system: TaskCreated is not accepted in state null',
      );
    });

    it('ReconcilerElected on another aggregate’s subject is refused', () => {
      const p = createProjection();
      applyAll(p, [record(1, subject.task(), taskCreated())]);
      expectRefused(
        p,
        record(2, subject.task(), reconcilerElected()),
        /task: ReconcilerElected is not accepted/,
      );
      expect(p.leader).toBeNull();
    });
  });

  describe('evaluate', () => {
    it('computes the transition without applying it, with the seq to append after', () => {
      const p = createProjection();
      applyAll(p, [
        record(4, subject.task(), taskCreated()),
        record(6, subject.task(), taskPublished()),
        record(8, subject.task(), taskStarted()),
      ]);
      const before = p.tasks.get('r1.t1')!.snapshot;
      const result = evaluate(p, parseEventSubject(subject.task())!, taskResultAccepted());
      expect(result).toMatchObject({
        from: 'Running',
        to: 'Finalizing',
        actions: ['enqueueFinalization'],
        seq: 8,
      });
      expect(String(result.next?.value)).toBe('Finalizing');
      expect(p.tasks.get('r1.t1')!.snapshot).toBe(before);
      expect(p.tasks.get('r1.t1')!.seq).toBe(8);
    });

    it('a creation is appended at seq 0 (the subject must be empty)', () => {
      const result = evaluate(
        createProjection(),
        parseEventSubject(subject.step())!,
        stepCreated(),
      );
      expect(result).toMatchObject({ from: null, to: 'Ready', seq: 0 });
    });

    it('an election is appended after the last one', () => {
      const p = createProjection();
      const ref = parseEventSubject(subject.system())!;
      expect(evaluate(p, ref, reconcilerElected()).seq).toBe(0);
      applyAll(p, [record(12, subject.system(), reconcilerElected())]);
      expect(evaluate(p, ref, reconcilerElected({ nodeId: 'n2' })).seq).toBe(12);
    });

    it('throws IllegalTransitionError for a refused event', () => {
      const p = createProjection();
      applyAll(p, [record(1, subject.task(), taskCreated())]);
      const ref = parseEventSubject(subject.task())!;
      expect(() => evaluate(p, ref, taskStarted())).toThrow(IllegalTransitionError);
      try {
        evaluate(p, ref, taskStarted());
      } catch (err: unknown) {
        expect(isSonarError(err, 'illegal_transition')).toBe(true);
        expect(err).toMatchObject({ machine: 'task', state: 'Pending', eventType: 'TaskStarted' });
      }
    });
  });

  describe('applyDecoded', () => {
    it('applies a decoded event and returns what it did', () => {
      const p = createProjection();
      const ref = parseEventSubject(subject.task())!;
      applyDecoded(p, ref, taskCreated(), 1);
      applyDecoded(p, ref, taskPublished(), 2);
      applyDecoded(p, ref, taskStarted(), 3);
      const applied = applyDecoded(p, ref, taskResultAccepted(), 4);
      expect(applied).toMatchObject({
        ref: { kind: 'task', key: 'r1.t1' },
        from: 'Running',
        to: 'Finalizing',
        actions: ['enqueueFinalization'],
      });
      expect(applied.event.type).toBe('TaskResultAccepted');
      expect(p.tasks.get('r1.t1')).toMatchObject({ seq: 4 });
      expect(p.lastSeq).toBe(4);
    });

    it('throws on a refused event and leaves the projection (lastSeq included) unchanged', () => {
      const p = createProjection();
      const ref = parseEventSubject(subject.task())!;
      applyDecoded(p, ref, taskCreated(), 1);
      const before = stateOf(p);
      expect(() => applyDecoded(p, ref, taskFinalized(), 2)).toThrow(
        'task: TaskFinalized is not accepted in state "Pending"',
      );
      expect(stateOf(p)).toEqual(before);
      expect(p.lastSeq).toBe(1);
    });
  });

  describe('retention: RunExpired and WorkerExpired', () => {
    /** Run r1 (steps s1, s2; tasks t1, t2 with inputs) finished at 10 s, and a Running r2. */
    function finishedRun(): Projection {
      const p = createProjection();
      const task = (runId: string, stepId: string, taskId: string) =>
        taskCreated({ runId, stepId, taskId, input: { payload: 'x'.repeat(100) } });
      const done = (taskId: string, seq: number): EventRecord[] => [
        record(seq, subject.task('r1', taskId), taskPublished({ attemptId: `a-${taskId}` })),
        record(seq + 1, subject.task('r1', taskId), taskStarted({ attemptId: `a-${taskId}` })),
        record(
          seq + 2,
          subject.task('r1', taskId),
          taskResultAccepted({ attemptId: `a-${taskId}` }),
        ),
        record(seq + 3, subject.task('r1', taskId), taskFinalized({ attemptId: `a-${taskId}` })),
      ];
      applyAll(p, [
        record(1, subject.step('r1', 's1'), stepCreated({ runId: 'r1', stepId: 's1' })),
        record(2, subject.step('r1', 's2'), stepCreated({ runId: 'r1', stepId: 's2' })),
        record(3, subject.task('r1', 't1'), task('r1', 's1', 't1')),
        record(4, subject.task('r1', 't2'), task('r1', 's2', 't2')),
        record(5, subject.run('r1'), runSubmitted({ stepIds: ['s1', 's2'], taskCount: 2 })),
        record(6, subject.step('r2', 's1'), stepCreated({ runId: 'r2', stepId: 's1' })),
        record(7, subject.task('r2', 't1'), task('r2', 's1', 't1')),
        record(8, subject.run('r2'), runSubmitted({ runId: 'r2' })),
        ...done('t1', 10),
        ...done('t2', 20),
        record(30, subject.step('r1', 's1'), stepSucceeded(at(9))),
        record(31, subject.step('r1', 's2'), stepSucceeded(at(9))),
        record(32, subject.run('r1'), runSucceeded(at(10))),
      ]);
      return p;
    }
    const expiry = (over: Parameters<typeof runExpired>[0] = {}) =>
      runExpired({ taskCount: 2, tasks: { Succeeded: 2 }, ...over }, at(100));

    it('RunExpired evicts a finished run: its run, steps, tasks and indexes; keeps its summary', () => {
      const p = finishedRun();
      const outcome = applyEvent(p, record(40, subject.run('r1'), expiry()));
      expect(outcome).toMatchObject({ ok: true, from: 'Succeeded', to: 'Expired', actions: [] });
      expect([...p.runs.keys()]).toEqual(['r2']);
      expect([...p.steps.keys()]).toEqual(['r2.s1']);
      expect([...p.tasks.keys()]).toEqual(['r2.t1']);
      expect([...p.stepTasks.keys()]).toEqual(['r2.s1']);
      expect([...p.stepIndex.keys()]).toEqual(['r2.s1']);
      expect([...p.activeSteps]).toEqual(['r2.s1']);
      expect([...p.activeRuns]).toEqual(['r2']);
      expect(openSets(p).Pending).toEqual(['r2.t1']);
      expect(p.expiredRuns.get('r1')).toEqual({
        runId: 'r1',
        state: 'Succeeded',
        reason: null,
        submittedAt: T0,
        endedAt: at(10),
        taskCount: 2,
        tasks: { Succeeded: 2 },
        expiredAt: at(100),
        seq: 40,
      });
      expect(p.lastSeq).toBe(40);
    });

    it('RunExpired is appended at seq 0: only onto the run subject once retention emptied it', () => {
      const p = finishedRun();
      const result = evaluate(p, parseEventSubject(subject.run('r1'))!, expiry());
      expect(result).toMatchObject({ from: 'Succeeded', to: 'Expired', next: null, seq: 0 });
    });

    it('a run the projection never held expires from the event alone (purged, snapshot lost)', () => {
      const p = createProjection();
      const summary = { runId: 'r9', state: 'Failed', reason: 'step s1 failed' } as const;
      applyAll(p, [record(5, subject.run('r9'), runExpired({ ...summary, tasks: { Failed: 1 } }))]);
      expect(p.runs.size).toBe(0);
      expect(p.expiredRuns.get('r9')).toMatchObject({ ...summary, tasks: { Failed: 1 }, seq: 5 });
    });

    it('is refused for a Running run, another final state, twice, or on another subject', () => {
      const p = finishedRun();
      const r2 = runExpired({ runId: 'r2', tasks: { Pending: 1 } });
      expectRefused(
        p,
        record(40, subject.run('r2'), r2),
        'run: RunExpired is not accepted in state "Running"',
      );
      expectRefused(p, record(41, subject.run('r1'), expiry({ state: 'Failed' })), /"Succeeded"/);
      expectRefused(p, record(42, subject.run('r2'), expiry()), /subject key r2/);
      expectRefused(p, record(43, subject.task('r1', 't1'), expiry()), /subject key r1.t1/);
      applyAll(p, [record(44, subject.run('r1'), expiry())]);
      expectRefused(p, record(45, subject.run('r1'), expiry()), /in state "Expired"/);
    });

    it('is refused while a task of the run is open (a Poisoned task can still be retried)', () => {
      const p = createProjection();
      applyAll(p, [
        record(1, subject.step(), stepCreated()),
        record(2, subject.task(), taskCreated()),
        record(3, subject.run(), runSubmitted()),
        record(4, subject.task(), taskPublished()),
        record(5, subject.task(), taskStarted()),
        record(6, subject.task(), taskResultAccepted()),
        record(7, subject.task(), taskPoisoned()),
        record(8, subject.run(), runFailed()),
      ]);
      const failed = runExpired({
        state: 'Failed',
        reason: 'step s1 failed',
        tasks: { Poisoned: 1 },
      });
      expectRefused(p, record(9, subject.run(), failed), /"Failed with open tasks"/);
      expect(p.tasks.has('r1.t1')).toBe(true);
    });

    it('nothing is created under an expired run id again', () => {
      const p = finishedRun();
      applyAll(p, [record(40, subject.run('r1'), expiry())]);
      expectRefused(
        p,
        record(41, subject.run('r1'), runSubmitted()),
        /RunSubmitted is not accepted in state "Expired"/,
      );
      expectRefused(
        p,
        record(42, subject.step('r1', 's3'), stepCreated({ stepId: 's3' })),
        /"Expired"/,
      );
      expectRefused(
        p,
        record(43, subject.task('r1', 't9'), taskCreated({ stepId: 's1', taskId: 't9' })),
        /"Expired"/,
      );
      expectRefused(p, record(44, subject.task('r1', 't1'), taskCancelled()), /state "none"/);
    });

    it('workersInService holds Active and Draining workers in join order', () => {
      const p = createProjection();
      applyAll(p, [
        ...threeWorkersJoined(),
        record(4, subject.worker('w1'), workerDraining()),
        record(5, subject.worker('w2'), workerLost()),
      ]);
      expect([...p.workersInService]).toEqual(['w1', 'w3']);
      applyAll(p, [record(6, subject.worker('w1'), workerLeft())]);
      expect([...p.workersInService]).toEqual(['w3']);
    });

    it('WorkerExpired evicts a Left or Lost worker and is refused for one in service', () => {
      const p = createProjection();
      applyAll(p, [
        ...threeWorkersJoined(),
        record(4, subject.worker('w1'), workerLeft()),
        record(5, subject.worker('w2'), workerLost()),
        record(6, subject.worker('w3'), workerDraining()),
      ]);
      const ref = parseEventSubject(subject.worker('w1'))!;
      expect(evaluate(p, ref, workerExpired())).toMatchObject({ from: 'Left', seq: 4 });
      expectRefused(p, record(7, subject.worker('w3'), workerExpired()), /"Draining"/);
      expect(applyEvent(p, record(8, subject.worker('w1'), workerExpired()))).toMatchObject({
        ok: true,
        from: 'Left',
        to: 'Expired',
      });
      applyAll(p, [record(9, subject.worker('w2'), workerExpired())]);
      expect([...p.workers.keys()]).toEqual(['w3']);
      expect([...p.workersInService]).toEqual(['w3']);
      expectRefused(p, record(10, subject.worker('w1'), workerExpired()), /state "none"/);
      expectRefused(p, record(11, subject.run('w3'), workerExpired()), /subject key w3/);
    });
  });

  describe('parseEventSubject', () => {
    it.each([
      ['sonar.events.task.r1.t1', { kind: 'task', key: 'r1.t1' }],
      ['sonar.events.step.scan-42.crawl', { kind: 'step', key: 'scan-42.crawl' }],
      ['sonar.events.run.scan_42', { kind: 'run', key: 'scan_42' }],
      ['sonar.events.worker.w-1', { kind: 'worker', key: 'w-1' }],
      ['sonar.events.system.reconciler', { kind: 'system', key: 'reconciler' }],
      ['acme.events.task.r1.t1', { kind: 'task', key: 'r1.t1' }],
    ])('%s -> %j', (subj, ref) => {
      expect(parseEventSubject(subj)).toEqual(ref);
    });

    it.each([
      ['empty', ''],
      ['too short', 'sonar.events.task'],
      ['not an events subject', 'sonar.dispatch.linux.x'],
      ['unknown kind', 'sonar.events.job.r1.t1'],
      ['task with one id', 'sonar.events.task.r1'],
      ['task with three ids', 'sonar.events.task.r1.t1.x'],
      ['step with one id', 'sonar.events.step.r1'],
      ['run with two ids', 'sonar.events.run.r1.x'],
      ['worker with two ids', 'sonar.events.worker.w1.x'],
      ['system with two ids', 'sonar.events.system.a.b'],
      ['a wildcard', 'sonar.events.task.r1.*'],
      ['an empty token', 'sonar.events.task..t1'],
      ['a bad character', 'sonar.events.task.r1.t$1'],
      ['an id over 64 characters', `sonar.events.run.${'x'.repeat(65)}`],
    ])('%s is not an event subject', (_name, subj) => {
      expect(parseEventSubject(subj)).toBeNull();
    });
  });

  describe('decodeEvent', () => {
    it('decodes a known event and fills its defaults', () => {
      const result = decodeEvent(
        'TaskCreated',
        { runId: 'r1', stepId: 's1', taskId: 't1', tags: ['linux'] },
        at(0),
      );
      expect(result).toEqual({
        ok: true,
        value: {
          type: 'TaskCreated',
          time: at(0),
          data: { runId: 'r1', stepId: 's1', taskId: 't1', tags: ['linux'], maxAttempts: 3 },
        },
      });
    });

    it('takes missing data as {} for events without fields', () => {
      expect(decodeEvent('StepReady', undefined, at(0))).toMatchObject({
        ok: true,
        value: { type: 'StepReady', data: {} },
      });
    });

    it.each([
      ['an unknown type', 'TaskExploded', 'unknown event type "TaskExploded"'],
      ['a missing type', undefined, 'unknown event type undefined'],
      ['a non-string type', 42, 'unknown event type 42'],
      ['an inherited property name', 'toString', 'unknown event type "toString"'],
    ])('refuses %s', (_name, type, message) => {
      const result = decodeEvent(type, {}, at(0));
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.error.message).toBe(message);
        expect(result.error.name).toBe('DecodeError');
        expect(isSonarError(result.error, 'decode')).toBe(true);
      }
    });

    it('refuses bad data, naming every field', () => {
      const result = decodeEvent(
        'TaskPublished',
        { attempt: 0, attemptId: 'a 1', tokenHash: 'xyz', tag: 'linux' },
        at(0),
      );
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.error.message).toMatch(/^TaskPublished: /);
        expect(result.error.message).toContain("'attempt'");
        expect(result.error.message).toContain("'attemptId'");
        expect(result.error.message).toContain("'tokenHash'");
        expect(result.error.message).not.toContain("'tag'");
      }
    });

    it('refuses a data value that is not an object', () => {
      const result = decodeEvent('TaskCancelled', 'operator', at(0));
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.error.message).toMatch(/^TaskCancelled: 'data' /);
    });

    it('refuses a reason outside the enum', () => {
      const result = decodeEvent(
        'TaskRequeued',
        { attemptId: 'a1', reason: 'timeout', recoveries: 0 },
        at(0),
      );
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.error.message).toContain("'reason'");
    });

    it.each([0, 2, 1.5])('refuses version %d', (v) => {
      const result = decodeEvent('TaskCancelled', { reason: 'x' }, at(0), v);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.error.message).toBe(`unsupported event version ${v}`);
    });

    it('accepts version 1', () => {
      const data = {
        attempt: 1,
        attemptId: 'a1',
        tokenHash: hexHash('a1'),
        tag: 'linux',
      };
      expect(decodeEvent('TaskPublished', data, at(0), 1)).toMatchObject({ ok: true });
    });
  });
});
