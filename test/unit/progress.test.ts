import { describe, it, expect } from 'vitest';
import type { ReconcilerEvent } from '../../actors/reconciler/decisions.js';
import { progress } from '../../actors/reconciler/progress.js';
import { starvationEvents } from '../../actors/reconciler/starvation.js';
import { vanishedWorkers } from '../../actors/reconciler/vanished-workers.js';
import {
  at,
  runCancelled,
  subject,
  taskAttemptFailed,
  taskCancelled,
  taskFinalizeRetried,
  taskFinalized,
  taskPoisoned,
  taskResultAccepted,
  workerLeft,
} from '../helpers/event-builders.js';
import { World, entry, ms } from '../helpers/reconciler-world.js';

/** Runs `key` (on r1) to Succeeded. */
function succeed(w: World, key: string): void {
  const attemptId = w.start(key, 'w1');
  const taskId = key.split('.')[1]!;
  w.add(subject.task('r1', taskId), taskResultAccepted({ attemptId }));
  w.add(subject.task('r1', taskId), taskFinalized({ attemptId }));
}

function fail(w: World, key: string): void {
  const attemptId = w.start(key, 'w1');
  w.add(subject.task('r1', key.split('.')[1]), taskAttemptFailed({ attemptId, retryable: false }));
}

function poison(w: World, key: string): string {
  const attemptId = w.start(key, 'w1');
  const taskId = key.split('.')[1]!;
  w.add(subject.task('r1', taskId), taskResultAccepted({ attemptId }));
  w.add(subject.task('r1', taskId), taskPoisoned({ attemptId }));
  return attemptId;
}

const brief = (events: ReconcilerEvent[]) => events.map((e) => `${e.type} ${e.ref.key}`);

/** Applies progress() until it has nothing left to say; returns everything it said. */
function settle(w: World): string[] {
  const said: string[] = [];
  for (let round = 0; round < 20; round++) {
    const events = progress(w.p);
    if (events.length === 0) return said;
    for (const e of events) {
      expect(w.emit(e), `${e.type} ${e.ref.key}`).toBe(true);
      said.push(`${e.type} ${e.ref.key}`);
    }
  }
  throw new Error('progress did not converge');
}

describe('progress', () => {
  it('says nothing about a run not yet submitted', () => {
    const w = new World().run('r1', [{ id: 's1', tasks: 0 }], { submit: false });
    expect(progress(w.p)).toEqual([]);
  });

  it('succeeds a step once every task Succeeded, then the run', () => {
    const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 2 }]);
    succeed(w, 'r1.s1-0');
    expect(progress(w.p)).toEqual([]);
    succeed(w, 'r1.s1-1');
    expect(settle(w)).toEqual(['StepSucceeded r1.s1', 'RunSucceeded r1']);
    expect(w.p.activeSteps.size).toBe(0);
    expect(w.p.activeRuns.size).toBe(0);
  });

  it('succeeds a step with no tasks at once', () => {
    const w = new World().run('r1', [{ id: 's1', tasks: 0 }]);
    expect(settle(w)).toEqual(['StepSucceeded r1.s1', 'RunSucceeded r1']);
  });

  it('waits for every announced task to exist', () => {
    const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 1 }]);
    // A step that announced 2 tasks but holds 1 (a log cut short) is not complete.
    w.p.steps.get('r1.s1')!.snapshot.context.taskCount = 2;
    succeed(w, 'r1.s1-0');
    expect(progress(w.p)).toEqual([]);
  });

  it('turns a Waiting step Ready once every after step Succeeded', () => {
    const w = new World().worker('w1').run('r1', [
      { id: 'a', tasks: 1 },
      { id: 'b', tasks: 1 },
      { id: 'c', tasks: 1, after: ['a', 'b'] },
    ]);
    succeed(w, 'r1.a-0');
    expect(settle(w)).toEqual(['StepSucceeded r1.a']);
    expect(w.state('r1.c')).toBe('Waiting');
    succeed(w, 'r1.b-0');
    expect(settle(w)).toEqual(['StepSucceeded r1.b', 'StepReady r1.c']);
  });

  it('fails a step once every task is settled and one failed, skips the steps after it and cancels their tasks', () => {
    const w = new World().worker('w1').run('r1', [
      { id: 'build', tasks: 2 },
      { id: 'lint', tasks: 1 },
      { id: 'test', tasks: 2, after: ['build'] },
      { id: 'deploy', tasks: 1, after: ['test', 'lint'] },
    ]);
    fail(w, 'r1.build-0');
    expect(progress(w.p)).toEqual([]); // build-1 is not settled yet
    succeed(w, 'r1.build-1');
    const events = progress(w.p);
    expect(events).toEqual([
      {
        ref: { kind: 'step', key: 'r1.build' },
        type: 'StepFailed',
        data: { reason: 'task build-0 failed', taskIds: ['build-0'] },
        seq: w.p.steps.get('r1.build')!.seq,
      },
    ]);
    expect(settle(w)).toEqual([
      'StepFailed r1.build',
      'StepSkipped r1.test',
      'TaskCancelled r1.test-0',
      'TaskCancelled r1.test-1',
      'StepSkipped r1.deploy',
      'TaskCancelled r1.deploy-0',
    ]);
    expect(w.p.steps.get('r1.deploy')!.snapshot.context.reason).toBe('step build failed');
    expect(w.p.tasks.get('r1.test-0')!.snapshot.context.error).toBe('cancelled: step build failed');
    // The run waits for lint, which is independent of build.
    expect(w.state('r1.lint')).toBe('Ready');
    succeed(w, 'r1.lint-0');
    expect(settle(w)).toEqual(['StepSucceeded r1.lint', 'RunFailed r1']);
    expect(w.p.runs.get('r1')!.snapshot.context.reason).toBe('step build failed');
  });

  it('names died and cancelled tasks, several at once', () => {
    const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 3 }]);
    w.add(subject.task('r1', 's1-0'), taskCancelled());
    w.add(subject.task('r1', 's1-2'), taskCancelled());
    succeed(w, 'r1.s1-1');
    expect(progress(w.p)[0]).toMatchObject({
      type: 'StepFailed',
      data: { reason: '2 tasks did not succeed (task s1-0 cancelled)', taskIds: ['s1-0', 's1-2'] },
    });
  });

  it('blocks a step whose only unfinished tasks are Poisoned; a retry makes it Ready again', () => {
    const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 2 }]);
    const attemptId = poison(w, 'r1.s1-0');
    succeed(w, 'r1.s1-1');
    expect(settle(w)).toEqual(['StepBlocked r1.s1']);
    expect(w.p.steps.get('r1.s1')!.snapshot.context.taskIds).toEqual(['s1-0']);
    expect(w.p.runs.get('r1')!.snapshot.value).toBe('Running');
    w.add(subject.task('r1', 's1-0'), taskFinalizeRetried({ attemptId }));
    expect(settle(w)).toEqual(['StepReady r1.s1']);
    w.add(subject.task('r1', 's1-0'), taskFinalized({ attemptId }));
    expect(settle(w)).toEqual(['StepSucceeded r1.s1', 'RunSucceeded r1']);
  });

  it('fails a Blocked step once its Poisoned task is cancelled', () => {
    const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 1 }]);
    poison(w, 'r1.s1-0');
    expect(settle(w)).toEqual(['StepBlocked r1.s1']);
    w.add(subject.task('r1', 's1-0'), taskCancelled());
    expect(settle(w)).toEqual(['StepFailed r1.s1', 'RunFailed r1']);
  });

  it('fails, not blocks, a step with a Failed and a Poisoned task', () => {
    const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 2 }]);
    poison(w, 'r1.s1-0');
    fail(w, 'r1.s1-1');
    expect(brief(progress(w.p))).toEqual(['StepFailed r1.s1']);
  });

  it('finishes a cut-short cancel: skips unfinished steps and cancels their tasks', () => {
    const w = new World().worker('w1').run('r1', [
      { id: 'a', tasks: 2 },
      { id: 'b', tasks: 1, after: ['a'] },
    ]);
    succeed(w, 'r1.a-0');
    w.add(subject.run('r1'), runCancelled());
    expect(settle(w)).toEqual([
      'StepSkipped r1.a',
      'StepSkipped r1.b',
      'TaskCancelled r1.a-1',
      'TaskCancelled r1.b-0',
    ]);
    expect(w.state('r1.a-0')).toBe('Succeeded');
    expect(w.p.activeSteps.size).toBe(0);
  });
});

describe('starvationEvents', () => {
  it('flags a step once when it becomes starved and unflags it once when served', () => {
    const w = new World().run('r1', [{ id: 's1', tasks: 1, tags: ['gpu', 'cuda'] }]);
    const starved = starvationEvents(w.p, ['r1.s1']);
    expect(starved).toMatchObject([{ type: 'StepStarved', data: { tags: ['cuda', 'gpu'] } }]);
    w.emit(starved[0]!);
    expect(starvationEvents(w.p, ['r1.s1'])).toEqual([]);
    expect(brief(starvationEvents(w.p, []))).toEqual(['StepServed r1.s1']);
  });
});

describe('vanishedWorkers', () => {
  const config = { pulseTtlMs: 15_000, ageFloorPassed: true };

  it('loses an Active or Draining worker whose key is gone', () => {
    const w = new World().worker('w1').worker('w2').worker('w3');
    w.add(subject.worker('w3'), workerLeft());
    const lost = vanishedWorkers(w.p, [entry('w2')], ms(16), config);
    expect(lost).toEqual([
      {
        ref: { kind: 'worker', key: 'w1' },
        type: 'WorkerLost',
        data: { lastPulseAt: null, reason: 'expired' },
        seq: 1,
      },
    ]);
  });

  it('gives a worker that just joined one pulse TTL to pulse, and waits for the age floor', () => {
    const w = new World().worker('w1', ['linux'], 2, at(0));
    expect(vanishedWorkers(w.p, [], ms(15), config)).toEqual([]);
    expect(vanishedWorkers(w.p, [], ms(16), { ...config, ageFloorPassed: false })).toEqual([]);
    expect(vanishedWorkers(w.p, [], ms(16), config)).toHaveLength(1);
  });
});
