import { describe, it, expect } from 'vitest';
import { resolvePlanConfig } from '../../actors/reconciler/config.js';
import type { PlanConfig } from '../../actors/reconciler/config.js';
import { plan } from '../../actors/reconciler/plan.js';
import { at, subject, taskRequeued } from '../helpers/event-builders.js';
import { World, entry, ms } from '../helpers/reconciler-world.js';

const config = (over: Partial<PlanConfig> = {}): PlanConfig => resolvePlanConfig(over);
const published = (d: { publish: { task: string }[] }): string[] => d.publish.map((x) => x.task);

/** Worker `w1` with `slots` on `linux`, pulsing at `pulse` seconds. */
const linux = (slots: number, pulse = 0) => [entry('w1', { slots, pulseAt: at(pulse) })];

describe('plan: priorities', () => {
  describe('order', () => {
    it('places a higher-priority step first, whatever the creation order', () => {
      const w = new World()
        .worker('w1', ['linux'], 2)
        .run('r1', [{ id: 'low', tasks: 3 }])
        .run('r2', [{ id: 'high', tasks: 3, priority: 5 }]);
      expect(published(plan(w.p, linux(2), ms(0), config()))).toEqual(['r2.high-0', 'r2.high-1']);
    });

    it('within one priority, steps take turns in creation order, batch by batch, as before', () => {
      const w = new World().worker('w1', ['linux'], 5).run('r1', [
        { id: 'a', tasks: 3, priority: 2 },
        { id: 'b', tasks: 3, priority: 2 },
        { id: 'c', tasks: 3 },
      ]);
      const d = plan(w.p, linux(5), ms(0), config({ batch: 2 }));
      expect(published(d)).toEqual(['r1.a-0', 'r1.a-1', 'r1.b-0', 'r1.b-1', 'r1.a-2']);
    });

    it('serves the next priority with what capacity the higher one could not use', () => {
      const w = new World().worker('w1', ['linux'], 3).run('r1', [
        { id: 'low', tasks: 5, priority: -1 },
        { id: 'high', tasks: 1, priority: 1 },
        { id: 'mid', tasks: 1 },
      ]);
      expect(published(plan(w.p, linux(3), ms(0), config()))).toEqual([
        'r1.high-0',
        'r1.mid-0',
        'r1.low-0',
      ]);
    });

    it("a task's own priority wins over its step's; it joins that priority's round-robin", () => {
      const w = new World().worker('w1', ['linux'], 3).run('r1', [
        // s1 is at 0, but its task 3 is at 4: it goes with s2's tasks, s1 first (created first).
        { id: 's1', tasks: 4, taskOwn: (i) => (i === 3 ? { priority: 4 } : {}) },
        { id: 's2', tasks: 2, priority: 4 },
      ]);
      const d = plan(w.p, linux(3), ms(0), config({ batch: 1 }));
      expect(published(d)).toEqual(['r1.s1-3', 'r1.s2-0', 'r1.s2-1']);
    });

    it("a task's own priority equal to its step's keeps its place in the step's order", () => {
      const w = new World()
        .worker('w1', ['linux'], 3)
        .run('r1', [
          { id: 's1', tasks: 3, priority: 2, taskOwn: (i) => (i === 1 ? { priority: 2 } : {}) },
        ]);
      expect(published(plan(w.p, linux(3), ms(0), config()))).toEqual([
        'r1.s1-0',
        'r1.s1-1',
        'r1.s1-2',
      ]);
    });

    it('a task back from an attempt keeps its own priority', () => {
      const w = new World().worker('w1', ['linux'], 1).run('r1', [
        { id: 'low', tasks: 2 },
        { id: 'any', tasks: 2, taskOwn: (i) => (i === 1 ? { priority: 9 } : {}) },
      ]);
      const attemptId = w.publish('r1.any-1');
      w.add(
        subject.task('r1', 'any-1'),
        taskRequeued({ attemptId, reason: 'worker-released' }, at(1)),
      );
      expect(published(plan(w.p, linux(1, 1), ms(1), config()))).toEqual(['r1.any-1']);
    });
  });

  describe('with capacity', () => {
    it('tag capacity: a higher priority takes its tags first, a lower one the other tags', () => {
      const w = new World().run('r1', [
        { id: 'low', tasks: 3, tags: ['linux', 'gpu'] },
        { id: 'high', tasks: 3, tags: ['gpu'], priority: 3 },
      ]);
      const live = [
        entry('g', { tags: ['gpu'], slots: 1 }),
        entry('l', { tags: ['linux'], slots: 2 }),
      ];
      w.worker('g', ['gpu'], 1).worker('l', ['linux'], 2);
      expect(plan(w.p, live, ms(0), config()).publish).toEqual([
        { task: 'r1.high-0', tag: 'gpu' },
        { task: 'r1.low-0', tag: 'linux' },
        { task: 'r1.low-1', tag: 'linux' },
      ]);
    });

    it('global capacity: a higher priority that fills it leaves nothing to a lower one', () => {
      const w = new World().worker('w1', ['linux'], 2).run('r1', [
        { id: 'low', tasks: 2 },
        { id: 'high', tasks: 2, priority: 1 },
      ]);
      const d = plan(w.p, linux(2), ms(0), config());
      expect(published(d)).toEqual(['r1.high-0', 'r1.high-1']);
    });

    it('step capacity: a higher-priority step at maxConcurrent lets a lower one have the rest', () => {
      const w = new World().worker('w1', ['linux'], 3).run('r1', [
        { id: 'low', tasks: 3 },
        { id: 'high', tasks: 3, priority: 1, maxConcurrent: 1 },
      ]);
      expect(published(plan(w.p, linux(3), ms(0), config()))).toEqual([
        'r1.high-0',
        'r1.low-0',
        'r1.low-1',
      ]);
    });

    it('a starved higher-priority step blocks nothing, and is still listed starved', () => {
      const w = new World().worker('w1', ['linux'], 2).run('r1', [
        { id: 'low', tasks: 2 },
        { id: 'high', tasks: 2, tags: ['rare'], priority: 9 },
      ]);
      const d = plan(w.p, linux(2), ms(0), config());
      expect(published(d)).toEqual(['r1.low-0', 'r1.low-1']);
      expect(d.starved).toEqual(['r1.high']);
    });
  });

  describe('aging (the starvation guard)', () => {
    // low (0) waits from T0; high (2) is created at `now`: it has waited nothing.
    function contest(lowWaitedS: number, over: Partial<PlanConfig> = {}) {
      const w = new World().worker('w1', ['linux'], 1).run('r1', [{ id: 'low', tasks: 1 }]);
      w.run('r2', [{ id: 'high', tasks: 1, priority: 2 }], { time: at(lowWaitedS) });
      return published(plan(w.p, linux(1, lowWaitedS), ms(lowWaitedS), config(over)));
    }

    it('a lower priority that waited less than (difference x aging) still goes after', () => {
      expect(contest(119.999)).toEqual(['r2.high-0']);
    });

    it('at exactly (difference x aging) it ties, and a tie goes to the higher priority', () => {
      expect(contest(120)).toEqual(['r2.high-0']);
    });

    it('one aging step more and the lower priority goes first', () => {
      expect(contest(180)).toEqual(['r1.low-0']);
    });

    it('takes SONAR_PRIORITY_AGING; 0 is strict priority, however long the wait', () => {
      expect(contest(30, { priorityAgingMs: 10_000 })).toEqual(['r1.low-0']);
      expect(contest(30 * 24 * 3600, { priorityAgingMs: 0 })).toEqual(['r2.high-0']);
    });

    it('never reorders steps of one priority: they take turns however long each waited', () => {
      const w = new World().worker('w1', ['linux'], 4).run('r1', [{ id: 'old', tasks: 4 }]);
      w.run('r2', [{ id: 'new', tasks: 4 }], { time: at(3600) });
      const d = plan(w.p, linux(4, 3600), ms(3600), config({ batch: 2 }));
      expect(published(d)).toEqual(['r1.old-0', 'r1.old-1', 'r2.new-0', 'r2.new-1']);
    });

    it('counts the wait from when a task could first be placed, not from its creation', () => {
      // Created at T0 but due only at 3000 s: at 3060 s it has aged 1 point, not 51.
      const at3000 = (nowS: number) => {
        const w = new World()
          .worker('w1', ['linux'], 1)
          .run('r1', [{ id: 'low', tasks: 1, taskOwn: () => ({ notBefore: at(3000) }) }]);
        w.run('r2', [{ id: 'high', tasks: 1, priority: 2 }], { time: at(nowS) });
        return published(plan(w.p, linux(1, nowS), ms(nowS), config()));
      };
      expect(at3000(3060)).toEqual(['r2.high-0']);
      expect(at3000(3180)).toEqual(['r1.low-0']);
    });
  });
});
