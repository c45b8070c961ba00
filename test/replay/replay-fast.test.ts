import { describe, it, expect } from 'vitest';
import { replay } from '../../actors/replay.js';
import { replayView } from '../../actors/replay-view.js';
import type { SonarEvent } from '../../actors/events.js';
import {
  at,
  line,
  runSubmitted,
  stepCreated,
  subject,
  taskAttemptFailed,
  taskCreated,
  taskPublished,
  taskRequeued,
  taskResultAccepted,
  taskStarted,
} from '../helpers/event-builders.js';
import { referenceFold } from '../helpers/reference-fold.js';

const EVENTS_PER_TASK = 10;

/**
 * A bulk log: one run, one step, `tasks` tasks of 10 events each, interleaved round by round
 * as a busy stream would hold them. Each task is published, lost with its worker, published
 * again, fails (retryable), is published a third time and its result accepted: it ends
 * Finalizing at attempt 3 with one counted recovery.
 */
function bulkLog(tasks: number): string[] {
  const ids = Array.from({ length: tasks }, (_, i) => `t${i}`);
  const rounds: ((taskId: string, t: string) => SonarEvent)[] = [
    (taskId, t) => taskCreated({ runId: 'bulk', stepId: 's1', taskId }, t),
    (taskId, t) => taskPublished({ attempt: 1, attemptId: `${taskId}-a1` }, t),
    (taskId, t) => taskStarted({ attemptId: `${taskId}-a1`, workerId: 'w-1' }, t),
    (taskId, t) => taskRequeued({ attemptId: `${taskId}-a1`, reason: 'worker-lost' }, t),
    (taskId, t) => taskPublished({ attempt: 2, attemptId: `${taskId}-a2` }, t),
    (taskId, t) => taskStarted({ attemptId: `${taskId}-a2`, workerId: 'w-2' }, t),
    (taskId, t) => taskAttemptFailed({ attemptId: `${taskId}-a2`, workerId: 'w-2' }, t),
    (taskId, t) => taskPublished({ attempt: 3, attemptId: `${taskId}-a3`, tag: 'gpu' }, t),
    (taskId, t) => taskStarted({ attemptId: `${taskId}-a3`, workerId: 'w-3' }, t),
    (taskId, t) => taskResultAccepted({ attemptId: `${taskId}-a3`, workerId: 'w-3' }, t),
  ];
  expect(rounds).toHaveLength(EVENTS_PER_TASK);
  const out: string[] = [
    JSON.stringify(
      line(1, subject.step('bulk', 's1'), stepCreated({ runId: 'bulk', taskCount: tasks })),
    ),
    JSON.stringify(
      line(
        2,
        subject.run('bulk'),
        runSubmitted({ runId: 'bulk', stepIds: ['s1'], taskCount: tasks }),
      ),
    ),
  ];
  let seq = 2;
  rounds.forEach((make, round) => {
    const time = at(round * 60);
    for (const taskId of ids) {
      seq++;
      out.push(JSON.stringify(line(seq, subject.task('bulk', taskId), make(taskId, time))));
    }
  });
  return out;
}

describe('replay (bulk)', () => {
  it('folds 200k task events into the right projection', { timeout: 120_000 }, () => {
    const tasks = 20_000;
    const lines = bulkLog(tasks);
    expect(lines).toHaveLength(tasks * EVENTS_PER_TASK + 2);

    const started = performance.now();
    const { projection: p, skipped } = replay(lines);
    const ms = performance.now() - started;
    console.log(
      `replay: ${lines.length} events in ${ms.toFixed(0)} ms = ${Math.round((lines.length / ms) * 1000)} events/s`,
    );

    expect(skipped).toEqual([]);
    expect(p.lastSeq).toBe(lines.length);
    expect(p.tasks.size).toBe(tasks);
    for (const [key, { snapshot, seq }] of p.tasks) {
      const taskId = key.slice('bulk.'.length);
      expect(snapshot.value).toBe('Finalizing');
      const c = snapshot.context;
      if (
        c.attempt !== 3 ||
        c.attemptId !== `${taskId}-a3` ||
        c.recoveries !== 1 ||
        c.failures !== 1
      ) {
        expect.fail(`${key}: ${JSON.stringify(c)}`);
      }
      expect(seq).toBeGreaterThan(2 + tasks * 9);
    }
    expect(p.tasksByState.Finalizing.size).toBe(tasks);
    for (const state of ['Pending', 'Published', 'Running', 'Poisoned'] as const) {
      expect(p.tasksByState[state].size).toBe(0);
    }
    const order = p.stepTasks.get('bulk.s1')!;
    expect(order).toHaveLength(tasks);
    expect(order.slice(0, 3)).toEqual(['bulk.t0', 'bulk.t1', 'bulk.t2']);
    expect(order.at(-1)).toBe(`bulk.t${tasks - 1}`);
    expect(p.steps.get('bulk.s1')!.snapshot.value).toBe('Ready');
    expect(p.runs.get('bulk')!.snapshot.value).toBe('Running');
  });

  it('equals the reference fold (public transition()) on a smaller bulk log', () => {
    const lines = bulkLog(500);
    const { projection, skipped } = replay(lines);
    expect(JSON.stringify(replayView(projection, skipped))).toBe(
      JSON.stringify(referenceFold(lines)),
    );
  });
});
