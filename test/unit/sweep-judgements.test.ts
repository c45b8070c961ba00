import { describe, expect, it } from 'vitest';
import { lastAdvertised } from '../../src/backend/sweep/last-advertised.js';
import { applyEvent } from '../../actors/projection.js';
import { expiredRuns, runExpiredData } from '../../src/backend/sweep/retention.js';
import { Deadline, settleWithin } from '../../src/grace.js';
import {
  T0,
  at,
  line,
  runCancelled,
  stepSkipped,
  subject,
  taskCancelled,
  workerLeft,
  workerLost,
} from '../helpers/event-builders.js';
import { World, entry, ms } from '../helpers/reconciler-world.js';

describe('lastAdvertised', () => {
  it('is now for a tag in the registry or held by a joined worker, else the end of its last worker', () => {
    const w = new World()
      .worker('gone', ['gpu', 'arm'])
      .add(subject.worker('gone'), workerLeft(at(60)))
      .worker('lost', ['gpu'])
      .add(subject.worker('lost'), workerLost({}, at(120)))
      .worker('joined', ['linux']);
    const seen = lastAdvertised(w.p, [entry('unknown', { tags: ['win'] })], ms(1_000));
    expect(Object.fromEntries(seen)).toEqual({
      gpu: ms(120),
      arm: ms(60),
      linux: ms(1_000),
      win: ms(1_000),
    });
  });
});

describe('expiredRuns', () => {
  const DAY = 86_400_000;
  it('lists runs finished more than the retention ago, and counts those with a task still open', () => {
    const w = new World()
      .run('done', [{ id: 's1', tasks: 1 }])
      .run('open', [{ id: 's1', tasks: 1 }]);
    w.run('fresh', [{ id: 's1', tasks: 1 }]);
    // 'done': its task cancelled, its step skipped, the run cancelled, all at T0.
    w.add(subject.task('done', 's1-0'), taskCancelled())
      .add(subject.step('done', 's1'), stepSkipped())
      .add(subject.run('done'), runCancelled());
    // 'open': the run ended but its task is still Pending (its step not settled).
    w.add(subject.run('open'), runCancelled());
    // 'fresh': ended a day after T0.
    w.add(subject.task('fresh', 's1-0'), taskCancelled({}, at(DAY / 1_000)))
      .add(subject.step('fresh', 's1'), stepSkipped({}, at(DAY / 1_000)))
      .add(subject.run('fresh'), runCancelled({}, at(DAY / 1_000)));
    const now = ms(30 * 86_400 + 1);
    expect(expiredRuns(w.p, now, 30 * DAY)).toEqual({ expired: ['done'], open: 1 });
    // "More than": exactly the retention is not yet past it.
    expect(expiredRuns(w.p, ms(30 * 86_400), 30 * DAY)).toEqual({ expired: [], open: 0 });
  });
});

describe('runExpiredData', () => {
  it('summarises a finished run across its steps, zero counts left out; the fold accepts it', () => {
    const w = new World().run('r', [
      { id: 'a', tasks: 2 },
      { id: 'b', tasks: 1 },
    ]);
    for (const t of ['a-0', 'a-1', 'b-0']) w.add(subject.task('r', t), taskCancelled({}, at(5)));
    w.add(subject.step('r', 'a'), stepSkipped({}, at(5)))
      .add(subject.step('r', 'b'), stepSkipped({}, at(5)))
      .add(subject.run('r'), runCancelled({ reason: 'operator' }, at(6)));
    const data = runExpiredData(w.p, 'r');
    expect(data).toEqual({
      runId: 'r',
      state: 'Cancelled',
      reason: 'operator',
      submittedAt: T0,
      endedAt: at(6),
      taskCount: 3,
      tasks: { Cancelled: 3 },
    });
    const outcome = applyEvent(
      w.p,
      line(10_000, subject.run('r'), { type: 'RunExpired', data, time: at(100) }),
    );
    expect(outcome).toMatchObject({ ok: true, from: 'Cancelled', to: 'Expired' });
    expect(w.p.tasks.size).toBe(0);
  });
});

describe('settleWithin and Deadline', () => {
  it('reports a promise that outlives the grace as timeout, and one that settles as done', async () => {
    expect(await settleWithin(new Promise(() => {}), 10)).toBe('timeout');
    expect(await settleWithin(Promise.reject(new Error('x')), 1_000)).toBe('done');
    let t = 0;
    const d = new Deadline(100, () => t);
    t = 60;
    expect(d.remainingMs).toBe(40);
    t = 200;
    expect(d.remainingMs).toBe(0);
    // Out of time: a settled promise still counts as done, a pending one is not waited for.
    expect(await d.settle(Promise.resolve())).toBe('done');
    expect(await d.settle(new Promise(() => {}))).toBe('timeout');
  });
});
