import { describe, it, expect } from 'vitest';
import { resolvePlanConfig } from '../../actors/reconciler/config.js';
import { delayedTasks } from '../../actors/reconciler/delays.js';
import { plan } from '../../actors/reconciler/plan.js';
import { replay } from '../../actors/replay.js';
import { readFileSync } from 'node:fs';
import { at } from '../helpers/event-builders.js';
import { World, entry, ms } from '../helpers/reconciler-world.js';

const config = resolvePlanConfig();
const published = (d: { publish: { task: string }[] }): string[] => d.publish.map((x) => x.task);
const linux = (slots: number, pulse: number) => [entry('w1', { slots, pulseAt: at(pulse) })];

/** Step `s1` of 3 tasks; task 0 not before 100 s. */
function taskDelayed(): World {
  return new World()
    .worker('w1', ['linux'], 3)
    .run('r1', [{ id: 's1', tasks: 3, taskOwn: (i) => (i === 0 ? { notBefore: at(100) } : {}) }]);
}

describe('plan: delays', () => {
  describe("a task's notBefore", () => {
    it('before it: passed over, the others placed, and counted delayed', () => {
      const d = plan(taskDelayed().p, linux(3, 99), ms(100) - 1, config);
      expect(published(d)).toEqual(['r1.s1-1', 'r1.s1-2']);
      expect(d.delayed).toEqual({ 'r1.s1': 1 });
    });

    it('at it: placed, in its creation order, and no longer delayed', () => {
      const d = plan(taskDelayed().p, linux(3, 100), ms(100), config);
      expect(published(d)).toEqual(['r1.s1-0', 'r1.s1-1', 'r1.s1-2']);
      expect('delayed' in d).toBe(false);
    });

    it('after it: placed', () => {
      const d = plan(taskDelayed().p, linux(3, 500), ms(500), config);
      expect(published(d)[0]).toBe('r1.s1-0');
    });

    it('a delay counts from the task creation, on the server time line', () => {
      const w = new World()
        .worker('w1', ['linux'], 1)
        .run('r1', [{ id: 's1', tasks: 1, taskOwn: () => ({ delayMs: 30_000 }) }], {
          time: at(10),
        });
      expect(published(plan(w.p, linux(1, 39), ms(40) - 1, config))).toEqual([]);
      expect(published(plan(w.p, linux(1, 40), ms(40), config))).toEqual(['r1.s1-0']);
    });

    it('a delayed task takes no capacity', () => {
      const d = plan(taskDelayed().p, linux(3, 0), ms(0), config);
      expect(d.capacity.global).toBe(3);
      expect(published(d)).toHaveLength(2);
    });
  });

  describe("a step's notBefore", () => {
    /** Step `s1` (2 tasks) not before 60 s; its task 1 has its own notBefore of `own`. */
    function stepDelayed(own: string): World {
      return new World().worker('w1', ['linux'], 2).run('r1', [
        {
          id: 's1',
          tasks: 2,
          notBefore: at(60),
          taskOwn: (i) => (i === 1 ? { notBefore: own } : {}),
        },
      ]);
    }

    it('holds every task back, its own earlier time included, and counts them all', () => {
      const d = plan(stepDelayed(at(0)).p, linux(2, 59), ms(60) - 1, config);
      expect(published(d)).toEqual([]);
      expect(d.delayed).toEqual({ 'r1.s1': 2 });
    });

    it('at it, tasks without a later time of their own go', () => {
      const d = plan(stepDelayed(at(90)).p, linux(2, 60), ms(60), config);
      expect(published(d)).toEqual(['r1.s1-0']);
      expect(d.delayed).toEqual({ 'r1.s1': 1 });
    });

    it('a step delay counts from the step creation', () => {
      const w = new World()
        .worker('w1', ['linux'], 1)
        .run('r1', [{ id: 's1', tasks: 1, delayMs: 5_000 }], { time: at(1) });
      expect(published(plan(w.p, linux(1, 5), ms(6) - 1, config))).toEqual([]);
      expect(published(plan(w.p, linux(1, 6), ms(6), config))).toEqual(['r1.s1-0']);
    });
  });

  describe('starvation', () => {
    it('a step whose Pending tasks are all delayed is not starved, even with no worker', () => {
      const w = new World().run('r1', [
        { id: 'held', tasks: 2, tags: ['rare'], notBefore: at(60) },
        { id: 'timed', tasks: 1, tags: ['rare'], taskOwn: () => ({ notBefore: at(60) }) },
      ]);
      const d = plan(w.p, [], ms(59), config);
      expect(d.starved).toEqual([]);
      expect(d.delayed).toEqual({ 'r1.held': 2, 'r1.timed': 1 });
    });

    it('once one of them is due, it is starved like any other step', () => {
      const w = new World().run('r1', [
        {
          id: 'timed',
          tasks: 2,
          tags: ['rare'],
          taskOwn: (i) => (i === 0 ? { notBefore: at(60) } : {}),
        },
      ]);
      expect(plan(w.p, [], ms(0), config).starved).toEqual(['r1.timed']);
    });
  });

  it('the priorities-and-delays replay scenario plans as sonar plan --json prints it', () => {
    const text = readFileSync(
      new URL('../replay/scenarios/priorities-and-delays.jsonl', import.meta.url),
      'utf8',
    );
    const { projection } = replay(text.split('\n'));
    const live = [entry('w-1', { slots: 4, pulseAt: '2026-06-01T08:00:09.000Z' })];
    const d = plan(projection, live, Date.parse('2026-06-01T08:00:10.000Z'), config);
    // bulk's notBefore 09:00+01:00 has passed; b1's own (08:30Z) and later's delay have not.
    // Two slots left: b2 (its own 7) before b3 (bulk's -10).
    expect(d.publish.map((x) => x.task)).toEqual(['night.b2', 'night.b3']);
    expect(d.delayed).toEqual({ 'night.later': 1, 'night.bulk': 1 });
    // At 08:30Z urgent's two come back (publish timeout): u1 at 50 first, b1 due at its
    // very time, u2 (its own -100) last, left out of the four slots.
    const late = [entry('w-1', { slots: 4, pulseAt: '2026-06-01T08:29:59.000Z' })];
    const then = plan(projection, late, Date.parse('2026-06-01T08:30:00.000Z'), config);
    expect(then.requeue.map((x) => x.task)).toEqual(['night.u1', 'night.u2']);
    expect(then.publish.map((x) => x.task)).toEqual([
      'night.u1',
      'night.b2',
      'night.b1',
      'night.b3',
    ]);
    expect(then.delayed).toEqual({ 'night.later': 1 });
  });

  it('a plan of a log without delays has no delayed field at all', () => {
    const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 3 }]);
    expect(Object.keys(plan(w.p, linux(2, 0), ms(0), config))).toEqual([
      'requeue',
      'dead',
      'publish',
      'starved',
      'capacity',
    ]);
  });

  it('delayedTasks counts any step, Waiting ones too (sonar status, the dashboard)', () => {
    const w = new World().run('r1', [
      { id: 'a', tasks: 1 },
      { id: 'b', tasks: 3, after: ['a'], delayMs: 60_000 },
    ]);
    expect(delayedTasks(w.p, 'r1.b', ms(59))).toBe(3);
    expect(delayedTasks(w.p, 'r1.b', ms(60))).toBe(0);
    expect(delayedTasks(w.p, 'r1.a', ms(0))).toBe(0);
  });
});
