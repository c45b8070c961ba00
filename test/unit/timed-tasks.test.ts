import { describe, it, expect } from 'vitest';
import { resolvePlanConfig } from '../../actors/reconciler/config.js';
import { delayedTasks } from '../../actors/reconciler/delays.js';
import { plan } from '../../actors/reconciler/plan.js';
import type { StepIndex } from '../../actors/projection.js';
import { TimedTasks } from '../../actors/timed-tasks.js';
import { at, subject, taskCancelled, taskRequeued } from '../helpers/event-builders.js';
import { World, entry, ms } from '../helpers/reconciler-world.js';

const due = (t: TimedTasks, priority: number | undefined, now: number): string[] => [
  ...t.due(priority, now),
];

describe('TimedTasks', () => {
  it('a task whose time equals now is due; one whose time is after now is not', () => {
    const t = new TimedTasks();
    t.add('a', undefined, 100);
    t.add('b', undefined, 101);
    expect(due(t, undefined, 99)).toEqual([]);
    expect(t.notYetDue(99)).toBe(2);
    expect(due(t, undefined, 100)).toEqual(['a']);
    expect(t.notYetDue(100)).toBe(1);
    expect(due(t, undefined, 101)).toEqual(['a', 'b']);
    expect(t.notYetDue(101)).toBe(0);
  });

  it('reads due tasks in creation order, whatever their times; ties keep creation order', () => {
    const t = new TimedTasks();
    const times = [50, 10, 50, 30, 10, 50];
    times.forEach((time, i) => t.add(`k${i}`, 1, time));
    expect(due(t, 1, 50)).toEqual(['k0', 'k1', 'k2', 'k3', 'k4', 'k5']);
    expect(due(t, 1, 10)).toEqual(['k1', 'k4']);
    expect(due(t, 1, 30)).toEqual(['k1', 'k3', 'k4']);
    expect(t.notYetDue(30)).toBe(3);
  });

  it('keeps priorities apart (undefined: the step’s)', () => {
    const t = new TimedTasks();
    t.add('a', undefined, 1);
    t.add('b', 2, 1);
    t.add('c', undefined, 1);
    expect(due(t, undefined, 1)).toEqual(['a', 'c']);
    expect(due(t, 2, 1)).toEqual(['b']);
    expect(due(t, 3, 1)).toEqual([]);
    expect([...t.priorities()]).toEqual([undefined, 2]);
  });

  it('a deleted task is neither read nor counted; the last of a priority takes it along', () => {
    const t = new TimedTasks();
    t.add('a', 2, 10);
    t.add('b', 2, 20);
    t.add('c', undefined, 30);
    expect(t.delete('a', 2)).toBe(true);
    expect(t.delete('a', 2)).toBe(false);
    expect(t.delete('c', 2)).toBe(false); // filed under the step's priority, not 2
    expect(due(t, 2, 100)).toEqual(['b']);
    expect(t.notYetDue(0)).toBe(2);
    expect(t.delete('b', 2)).toBe(true);
    expect([...t.priorities()]).toEqual([undefined]);
    expect(t.size).toBe(1);
    expect(t.entries()).toEqual([['c', undefined, 30]]);
  });

  it('a time that does not parse is due at once, as before', () => {
    const t = new TimedTasks();
    t.add('a', undefined, Number.NaN);
    expect(due(t, undefined, 0)).toEqual(['a']);
    expect(t.notYetDue(0)).toBe(0);
  });

  it('agrees with a plain list through thousands of adds and deletes (gaps swept, chunks split)', () => {
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const t = new TimedTasks();
    const model: { key: string; priority: number | undefined; time: number }[] = [];
    const priorityOf = (i: number): number | undefined => (i % 3 === 0 ? undefined : i % 3);
    for (let i = 0; i < 6_000; i++) {
      const time = rand(200);
      t.add(`k${i}`, priorityOf(i), time);
      model.push({ key: `k${i}`, priority: priorityOf(i), time });
      // Mostly the oldest go (as placement takes them), some anywhere.
      if (rand(3) !== 0) {
        const j = rand(4) === 0 ? rand(model.length) : 0;
        const [gone] = model.splice(j, 1);
        expect(t.delete(gone!.key, gone!.priority)).toBe(true);
      }
      if (i % 500 === 499) {
        for (const now of [-1, 0, 57, 100, 199, 200]) {
          expect(t.notYetDue(now)).toBe(model.filter((m) => m.time > now).length);
          for (const priority of [undefined, 1, 2]) {
            const want = model.filter((m) => m.priority === priority && m.time <= now);
            expect(due(t, priority, now)).toEqual(want.map((m) => m.key));
          }
        }
      }
    }
    expect(t.size).toBe(model.length);
    while (model.length > 0) {
      const gone = model.pop()!;
      expect(t.delete(gone.key, gone.priority)).toBe(true);
    }
    expect(t.size).toBe(0);
    expect(t.notYetDue(-1)).toBe(0);
    expect([...t.priorities()]).toEqual([]);
  });
});

describe('StepIndex lanes and timed tasks, through the fold and plan', () => {
  const config = resolvePlanConfig();
  const published = (d: { publish: { task: string }[] }): string[] => d.publish.map((x) => x.task);
  const linux = (slots: number, pulse: number) => [entry('w1', { slots, pulseAt: at(pulse) })];
  const indexOf = (w: World, step = 'r1.s1'): StepIndex => w.p.stepIndex.get(step)!;
  const lanesOf = (i: StepIndex) => [...i.lanes].map(([p, keys]) => [p, [...keys]]);

  /**
   * Step `s1` at priority 0 with 6 tasks: 0 and 3 not before 100 s, 1 and 4 at priority 5
   * (4 also not before 100 s), the rest plain.
   */
  function mixed(): World {
    return new World().worker('w1', ['linux'], 10).run('r1', [
      {
        id: 's1',
        tasks: 6,
        taskOwn: (i) => ({
          ...((i === 1 || i === 4) && { priority: 5 }),
          ...((i === 0 || i === 3 || i === 4) && { notBefore: at(100) }),
        }),
      },
    ]);
  }

  it('files each fresh task once: untimed ones by priority, timed ones by priority and time', () => {
    const i = indexOf(mixed());
    expect([...i.fresh]).toEqual([
      'r1.s1-0',
      'r1.s1-1',
      'r1.s1-2',
      'r1.s1-3',
      'r1.s1-4',
      'r1.s1-5',
    ]);
    expect(lanesOf(i)).toEqual([
      [5, ['r1.s1-1']],
      [undefined, ['r1.s1-2', 'r1.s1-5']],
    ]);
    expect(i.timed.entries()).toEqual([
      ['r1.s1-0', undefined, ms(100)],
      ['r1.s1-3', undefined, ms(100)],
      ['r1.s1-4', 5, ms(100)],
    ]);
  });

  it('at the notBefore the timed tasks are due, merged into their lanes in creation order', () => {
    const w = mixed();
    expect(published(plan(w.p, linux(10, 99), ms(100) - 1, config))).toEqual([
      'r1.s1-1',
      'r1.s1-2',
      'r1.s1-5',
    ]);
    expect(delayedTasks(w.p, 'r1.s1', ms(100) - 1)).toBe(3);
    expect(published(plan(w.p, linux(10, 100), ms(100), config))).toEqual([
      'r1.s1-1',
      'r1.s1-4',
      'r1.s1-0',
      'r1.s1-2',
      'r1.s1-3',
      'r1.s1-5',
    ]);
    expect(delayedTasks(w.p, 'r1.s1', ms(100))).toBe(0);
  });

  it('a task that leaves Pending leaves its lane or the timed tasks', () => {
    const w = mixed();
    w.publish('r1.s1-1');
    w.publish('r1.s1-4');
    w.add(subject.task('r1', 's1-0'), taskCancelled({}));
    w.add(subject.task('r1', 's1-2'), taskCancelled({}));
    const i = indexOf(w);
    expect(lanesOf(i)).toEqual([[undefined, ['r1.s1-5']]]);
    expect(i.timed.entries()).toEqual([['r1.s1-3', undefined, ms(100)]]);
    expect(i.timed.notYetDue(ms(0))).toBe(1);
    expect(published(plan(w.p, linux(10, 100), ms(100), config))).toEqual(['r1.s1-3', 'r1.s1-5']);
  });

  it('a requeued task is back in `returned`, in no lane, read in creation order with them', () => {
    const w = mixed();
    const attemptId = w.publish('r1.s1-0', 'linux', at(100));
    w.add(
      subject.task('r1', 's1-0'),
      taskRequeued({ attemptId, reason: 'publish-timeout' }, at(101)),
    );
    const i = indexOf(w);
    expect([...i.returned]).toEqual(['r1.s1-0']);
    expect(i.timed.entries().map(([key]) => key)).toEqual(['r1.s1-3', 'r1.s1-4']);
    // Its notBefore is behind it: it went back with no time of its own, ahead of later tasks.
    expect(published(plan(w.p, linux(10, 50), ms(50), config))).toEqual([
      'r1.s1-1',
      'r1.s1-0',
      'r1.s1-2',
      'r1.s1-5',
    ]);
  });

  it("a task's own priority equal to its step's shares the step's level, in creation order", () => {
    const w = new World().worker('w1', ['linux'], 10).run('r1', [
      {
        id: 's1',
        tasks: 4,
        priority: 2,
        taskOwn: (i) => ({
          ...(i % 2 === 0 && { priority: 2 }),
          ...(i === 2 && { notBefore: at(10) }),
        }),
      },
    ]);
    expect(lanesOf(indexOf(w))).toEqual([
      [2, ['r1.s1-0']],
      [undefined, ['r1.s1-1', 'r1.s1-3']],
    ]);
    expect(published(plan(w.p, linux(10, 10), ms(10), config))).toEqual([
      'r1.s1-0',
      'r1.s1-1',
      'r1.s1-2',
      'r1.s1-3',
    ]);
  });
});
