import { describe, it, expect } from 'vitest';
import { replayView } from '../../actors/replay-view.js';
import { resolvePlanConfig } from '../../actors/reconciler/config.js';
import type { PlanConfig } from '../../actors/reconciler/config.js';
import { plan } from '../../actors/reconciler/plan.js';
import { recoveriesInWindow, recoveryEvents } from '../../actors/reconciler/recovery.js';
import {
  at,
  subject,
  taskAttemptFailed,
  taskRequeued,
  workerDraining,
  workerLost,
} from '../helpers/event-builders.js';
import { World, entry, ms } from '../helpers/reconciler-world.js';

const MIN = 60;
const HOUR = 3600;
const config = (over: Partial<PlanConfig> = {}): PlanConfig => resolvePlanConfig(over);

/** One run `r1`, one step `s1` of `tasks` tasks on `linux`, and worker `w1` (2 slots). */
function oneStep(tasks = 1, step: Partial<Parameters<World['run']>[1][number]> = {}): World {
  return new World().worker('w1').run('r1', [{ id: 's1', tasks, ...step }]);
}

/** Requeues `key`'s current attempt with `reason` at `seconds`. */
function requeue(w: World, key: string, reason: 'worker-lost' | 'publish-timeout', s: number) {
  const [runId, taskId] = key.split('.') as [string, string];
  const attemptId = w.p.tasks.get(key)!.snapshot.context.attemptId!;
  w.add(subject.task(runId, taskId), taskRequeued({ attemptId, reason }, at(s)));
}

describe('plan', () => {
  describe('publish timeout (rule 1)', () => {
    it('leaves a task Published for exactly publishTimeout, requeues it 1 ms later', () => {
      const w = oneStep();
      w.publish('r1.s1-0');
      const live = [entry('w1', { pulseAt: at(10 * MIN) })];
      expect(plan(w.p, live, ms(10 * MIN), config()).requeue).toEqual([]);
      expect(plan(w.p, live, ms(10 * MIN) + 1, config()).requeue).toEqual([
        { task: 'r1.s1-0', reason: 'publish-timeout' },
      ]);
    });

    it('requeues at once a Published attempt found without its dispatch message, and only it', () => {
      const w = oneStep(2);
      w.publish('r1.s1-0');
      w.publish('r1.s1-1');
      const lost = w.p.tasks.get('r1.s1-0')!.snapshot.context.attemptId!;
      const live = [entry('w1', { pulseAt: at(1) })];
      const d = plan(w.p, live, ms(1), config(), new Set([lost, 'an-attempt-long-gone']));
      expect(d.requeue).toEqual([{ task: 'r1.s1-0', reason: 'publish-timeout' }]);
      expect(plan(w.p, live, ms(1), config()).requeue).toEqual([]);
    });

    it('takes the flag value', () => {
      const w = oneStep();
      w.publish('r1.s1-0');
      const d = plan(w.p, [], ms(31), config({ publishTimeoutMs: 30_000 }));
      expect(d.requeue).toEqual([{ task: 'r1.s1-0', reason: 'publish-timeout' }]);
    });

    it('never kills a task: publish timeouts do not count towards the recovery limit', () => {
      const w = oneStep();
      w.publish('r1.s1-0');
      requeue(w, 'r1.s1-0', 'publish-timeout', 11 * MIN);
      w.publish('r1.s1-0', 'linux', at(12 * MIN));
      requeue(w, 'r1.s1-0', 'publish-timeout', 23 * MIN);
      w.publish('r1.s1-0', 'linux', at(24 * MIN));
      const d = plan(w.p, [], ms(35 * MIN), config({ recoveryLimit: 1 }));
      expect(d).toMatchObject({ requeue: [{ task: 'r1.s1-0' }], dead: [] });
    });
  });

  describe('orphans (rule 2)', () => {
    it('requeues a Running task of a worker that is not live after more than orphanAge', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1');
      expect(plan(w.p, [], ms(10 * MIN), config()).requeue).toEqual([]);
      expect(plan(w.p, [], ms(10 * MIN) + 1, config()).requeue).toEqual([
        { task: 'r1.s1-0', reason: 'worker-lost' },
      ]);
    });

    it('never touches a long task on a worker that still pulses', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1');
      const now = 50 * HOUR;
      const live = [entry('w1', { pulseAt: at(now - 1) })];
      expect(plan(w.p, live, ms(now), config())).toMatchObject({ requeue: [], dead: [] });
    });

    it('takes back, uncounted, a Running task its live worker no longer lists, a pulse TTL on', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1'); // started at T0
      const ttl = config().pulseTtlMs / 1000;
      const listing = (s: number, running: string[]) => [entry('w1', { pulseAt: at(s), running })];
      // Listed: a long command on a live worker, never touched.
      expect(plan(w.p, listing(HOUR, ['r1.s1-0']), ms(HOUR), config()).requeue).toEqual([]);
      // Not listed, but the entry may have been composed before the start: wait a TTL.
      expect(plan(w.p, listing(ttl, []), ms(ttl), config()).requeue).toEqual([]);
      // Not listed a TTL after the start: the worker gave it back (a start whose reply was lost).
      const d = plan(w.p, listing(ttl + 1, []), ms(ttl + 1), config({ recoveryLimit: 1 }));
      expect(d.requeue).toEqual([{ task: 'r1.s1-0', reason: 'worker-released' }]);
      expect(d.dead).toEqual([]);
      expect(recoveryEvents(w.p, d)[0]!.data).toMatchObject({
        reason: 'worker-released',
        recoveries: 0,
      });
      // An entry without `running` (a hand-written plan input) proves nothing.
      expect(plan(w.p, [entry('w1', { pulseAt: at(HOUR) })], ms(HOUR), config()).requeue).toEqual(
        [],
      );
    });

    it('waits for a live worker whose pulse is stale: live is judged by the key, not the pulse', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1');
      const d = plan(w.p, [entry('w1', { pulseAt: at(0) })], ms(HOUR), config());
      expect(d.requeue).toEqual([]);
      expect(d.capacity.tags).toEqual({});
    });

    it('leaves the tasks of a draining worker (live, not eligible) alone', () => {
      const w = oneStep(2);
      w.start('r1.s1-0', 'w1');
      w.add(subject.worker('w1'), workerDraining());
      const live = [entry('w1', { active: false, pulseAt: at(HOUR) })];
      const d = plan(w.p, live, ms(HOUR), config());
      expect(d).toMatchObject({ requeue: [], publish: [], starved: ['r1.s1'] });
      expect(d.capacity).toEqual({ global: 0, tags: {}, steps: {} });
    });

    it('does not place on a worker the log says is Draining, even if its entry still says active', () => {
      const w = oneStep();
      w.add(subject.worker('w1'), workerDraining());
      const d = plan(w.p, [entry('w1')], ms(1), config());
      expect(d.publish).toEqual([]);
    });

    it('requeues at once, whatever the age, when the worker is Lost with reason exited', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1');
      w.add(subject.worker('w1'), workerLost({ reason: 'exited' }, at(1)));
      const d = plan(w.p, [], ms(2), config({ ageFloorPassed: false }));
      expect(d.requeue).toEqual([{ task: 'r1.s1-0', reason: 'worker-lost' }]);
    });

    it('treats a Lost worker whose key came back (a partition) as not live', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1');
      w.add(subject.worker('w1'), workerLost({ reason: 'expired' }, at(30)));
      const live = [entry('w1', { pulseAt: at(11 * MIN) })];
      const d = plan(w.p, live, ms(11 * MIN), config());
      expect(d.requeue).toEqual([{ task: 'r1.s1-0', reason: 'worker-lost' }]);
      expect(d.capacity.global).toBe(0);
    });

    it('judges no orphan by a missing key before the age floor has passed', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1');
      expect(plan(w.p, [], ms(HOUR), config({ ageFloorPassed: false })).requeue).toEqual([]);
      expect(plan(w.p, [], ms(HOUR), config({ ageFloorPassed: true })).requeue).toHaveLength(1);
    });

    it('publish timeouts still apply before the age floor (they do not read the registry)', () => {
      const w = oneStep();
      w.publish('r1.s1-0');
      const d = plan(w.p, [], ms(HOUR), config({ ageFloorPassed: false }));
      expect(d.requeue).toEqual([{ task: 'r1.s1-0', reason: 'publish-timeout' }]);
    });

    it("counts a Published task's wait from the return of steady contact at the earliest", () => {
      const w = oneStep();
      w.publish('r1.s1-0');
      const timeout = config().publishTimeoutMs;
      // Published an hour ago, but the server came back only a moment ago: no worker could
      // start it meanwhile.
      const back = config({ steadyContactMs: timeout - 1 });
      expect(plan(w.p, [], ms(HOUR), back).requeue).toEqual([]);
      const waitedSince = config({ steadyContactMs: timeout + 1 });
      expect(plan(w.p, [], ms(HOUR), waitedSince).requeue).toEqual([
        { task: 'r1.s1-0', reason: 'publish-timeout' },
      ]);
    });

    it('and, for a task Published before the break, from the redelivery of its message', () => {
      const w = oneStep();
      w.publish('r1.s1-0');
      const timeout = config().publishTimeoutMs;
      const ackWait = 60_000;
      // Its message may be pending with a worker that lost it: the server hands it out again
      // only ack_wait into the contact, and the timeout counts from there.
      const atRedelivery = config({ steadyContactMs: timeout + 1, dispatchAckWaitMs: ackWait });
      expect(plan(w.p, [], ms(HOUR), atRedelivery).requeue).toEqual([]);
      const after = config({ steadyContactMs: ackWait + timeout + 1, dispatchAckWaitMs: ackWait });
      expect(plan(w.p, [], ms(HOUR), after).requeue).toHaveLength(1);
      // A task Published during the steady contact counts from its publish, as ever.
      const fresh = oneStep();
      fresh.publish('r1.s1-0');
      const during = config({ steadyContactMs: 2 * timeout, dispatchAckWaitMs: ackWait });
      expect(plan(fresh.p, [], ms(0) + timeout + 1, during).requeue).toHaveLength(1);
    });
  });

  describe('recovery limit (rule 3)', () => {
    /** A Running task with counted recoveries at the given times (seconds), orphaned at `now`. */
    function recovered(times: number[], now: number): World {
      const w = oneStep();
      for (const t of times) {
        w.start('r1.s1-0', 'w1', 'linux', at(t - 1));
        requeue(w, 'r1.s1-0', 'worker-lost', t);
      }
      w.start('r1.s1-0', 'w1', 'linux', at(now - 11 * MIN));
      return w;
    }

    it('counts a recovery 71 h ago: 2 in the window, the third goes Dead', () => {
      const now = 100 * HOUR;
      const w = recovered([now - 71 * HOUR, now - HOUR], now);
      const d = plan(w.p, [], ms(now), config());
      expect(d).toMatchObject({ requeue: [], dead: [{ task: 'r1.s1-0' }] });
      expect(recoveryEvents(w.p, d)).toMatchObject([
        { type: 'TaskDead', data: { reason: 'recovery-limit', recoveries: 3 } },
      ]);
    });

    it('does not count a recovery 73 h ago: the task goes back to Pending', () => {
      const now = 100 * HOUR;
      const w = recovered([now - 73 * HOUR, now - HOUR], now);
      const d = plan(w.p, [], ms(now), config());
      expect(d).toMatchObject({ requeue: [{ task: 'r1.s1-0', reason: 'worker-lost' }], dead: [] });
      const attemptId = w.p.tasks.get('r1.s1-0')!.snapshot.context.attemptId;
      expect(recoveryEvents(w.p, d)).toEqual([
        {
          ref: { kind: 'task', key: 'r1.s1-0' },
          type: 'TaskRequeued',
          data: { attemptId, reason: 'worker-lost', recoveries: 3 },
          seq: w.p.tasks.get('r1.s1-0')!.seq,
        },
      ]);
    });

    it('puts a recovery exactly 72 h ago outside the window (strictly after now - 72 h)', () => {
      const now = 100 * HOUR;
      expect(recoveriesInWindow([at(now - 72 * HOUR)], ms(now), 72 * HOUR * 1000)).toBe(0);
      expect(recoveriesInWindow([at(now - 72 * HOUR + 0.001)], ms(now), 72 * HOUR * 1000)).toBe(1);
    });

    it('honours recoveryLimit and recoveryWindow flags', () => {
      const now = 10 * HOUR;
      const w = recovered([now - 2 * HOUR], now);
      expect(plan(w.p, [], ms(now), config({ recoveryLimit: 2 })).dead).toHaveLength(1);
      const narrow = config({ recoveryLimit: 2, recoveryWindowMs: HOUR * 1000 });
      expect(plan(w.p, [], ms(now), narrow).dead).toEqual([]);
    });

    it('gives publish-timeout requeues recoveries = the counted ones so far', () => {
      const w = oneStep();
      w.start('r1.s1-0', 'w1');
      requeue(w, 'r1.s1-0', 'worker-lost', 60);
      w.publish('r1.s1-0', 'linux', at(61));
      const d = plan(w.p, [], ms(61 + 10 * MIN + 1), config());
      expect(recoveryEvents(w.p, d)).toMatchObject([
        { data: { reason: 'publish-timeout', recoveries: 1 } },
      ]);
    });
  });

  describe('capacity', () => {
    it('counts a pulse exactly pulse TTL old as recent and a staler one as not', () => {
      const w = oneStep(3);
      const live = [entry('w1', { pulseAt: at(0) })];
      expect(plan(w.p, live, ms(15), config()).capacity.global).toBe(2);
      expect(plan(w.p, live, ms(15) + 1, config())).toMatchObject({
        capacity: { global: 0, tags: {} },
        publish: [],
        starved: ['r1.s1'],
      });
      expect(plan(w.p, live, ms(31), config({ pulseTtlMs: 31_000 })).capacity.global).toBe(2);
    });

    it('counts a worker with several tags once globally and once per tag', () => {
      const w = new World().worker('w1', ['a', 'b'], 4).run('r1', [{ id: 's1', tasks: 0 }]);
      const live = [entry('w1', { tags: ['a', 'b'], slots: 4 }), entry('w2', { tags: ['b'] })];
      expect(plan(w.p, live, ms(1), config()).capacity).toEqual({
        global: 6,
        tags: { a: 4, b: 6 },
        steps: {},
      });
    });

    it('counts a tag a worker lists twice once, and a key with no WorkerJoined as the registry says', () => {
      const live = [entry('w1', { tags: ['a', 'a'], slots: 2 })];
      expect(plan(new World().p, live, ms(1), config()).capacity).toEqual({
        global: 2,
        tags: { a: 2 },
        steps: {},
      });
    });

    it('applies the multiplier and floors', () => {
      const w = new World();
      const live = [entry('w1', { slots: 3 }), entry('w2', { slots: 2, tags: ['gpu'] })];
      expect(plan(w.p, live, ms(1), config({ capacityMultiplier: 1.5 })).capacity).toEqual({
        global: 7,
        tags: { gpu: 3, linux: 4 },
        steps: {},
      });
    });

    it('subtracts tasks in flight per tag and globally, and reports a negative figure as 0', () => {
      const w = new World().worker('w1').run('r1', [{ id: 's1', tasks: 3 }]);
      w.start('r1.s1-0', 'w1');
      w.start('r1.s1-1', 'w1');
      w.publish('r1.s1-2');
      const d = plan(w.p, [entry('w1')], ms(1), config());
      expect(d.capacity).toEqual({ global: 0, tags: { linux: 0 }, steps: {} });
    });

    it('counts requeues and deaths out of flight before reporting capacity', () => {
      const w = oneStep(2, { maxConcurrent: 2 });
      w.start('r1.s1-0', 'w-gone');
      w.start('r1.s1-1', 'w1');
      const d = plan(w.p, [entry('w1', { pulseAt: at(11 * MIN) })], ms(11 * MIN), config());
      expect(d.requeue).toEqual([{ task: 'r1.s1-0', reason: 'worker-lost' }]);
      expect(d.capacity).toEqual({ global: 1, tags: { linux: 1 }, steps: { 'r1.s1': 1 } });
      // ...and the requeued task is placed again in the same tick.
      expect(d.publish).toEqual([{ task: 'r1.s1-0', tag: 'linux' }]);
    });

    it('lists step capacity only for Ready steps with maxConcurrent', () => {
      const w = new World().worker('w1').run('r1', [
        { id: 'a', tasks: 1, maxConcurrent: 3 },
        { id: 'b', tasks: 1 },
        { id: 'c', tasks: 1, maxConcurrent: 2, after: ['a'] },
      ]);
      expect(plan(w.p, [entry('w1')], ms(1), config()).capacity.steps).toEqual({ 'r1.a': 3 });
    });
  });

  describe('placement', () => {
    it('places Pending tasks in creation order up to capacity', () => {
      const w = oneStep(5);
      const d = plan(w.p, [entry('w1', { slots: 3 })], ms(1), config());
      expect(d.publish).toEqual([
        { task: 'r1.s1-0', tag: 'linux' },
        { task: 'r1.s1-1', tag: 'linux' },
        { task: 'r1.s1-2', tag: 'linux' },
      ]);
    });

    it('honours maxConcurrent', () => {
      const w = oneStep(5, { maxConcurrent: 2 });
      w.start('r1.s1-0', 'w1');
      const d = plan(w.p, [entry('w1', { slots: 10 })], ms(1), config());
      expect(d.publish.map((p) => p.task)).toEqual(['r1.s1-1']);
      expect(d.capacity.steps).toEqual({ 'r1.s1': 1 });
    });

    it('round-robins over Ready steps in creation order, batch tasks per turn', () => {
      const w = new World().run('r1', [
        { id: 'a', tasks: 5 },
        { id: 'b', tasks: 5 },
      ]);
      w.run('r2', [{ id: 'c', tasks: 1 }]);
      const d = plan(w.p, [entry('w1', { slots: 6 })], ms(1), config({ batch: 2 }));
      expect(d.publish.map((p) => p.task)).toEqual([
        'r1.a-0',
        'r1.a-1',
        'r1.b-0',
        'r1.b-1',
        'r2.c-0',
        'r1.a-2',
      ]);
    });

    it('sends each task to its target tag with the most capacity left, ties by name', () => {
      const w = new World().run('r1', [{ id: 's1', tasks: 4, tags: ['b', 'a'] }]);
      const live = [entry('w1', { tags: ['a'], slots: 2 }), entry('w2', { tags: ['b'], slots: 3 })];
      const d = plan(w.p, live, ms(1), config());
      expect(d.publish.map((p) => p.tag)).toEqual(['b', 'a', 'b', 'a']);
    });

    it('passes over a task whose tags have no capacity and places later ones', () => {
      const w = new World().run('r1', [
        { id: 's1', tasks: 3, taskTags: (i) => (i === 0 ? ['gpu'] : ['linux']) },
      ]);
      w.worker('g1', ['gpu'], 1).start('r1.s1-0', 'g1', 'gpu');
      w.run('r2', [{ id: 's1', tasks: 2, taskTags: (i) => (i === 0 ? ['gpu'] : ['linux']) }]);
      const live = [entry('g1', { tags: ['gpu'], slots: 1 }), entry('w1', { slots: 4 })];
      const d = plan(w.p, live, ms(1), config());
      expect(d.publish).toEqual([
        { task: 'r1.s1-1', tag: 'linux' },
        { task: 'r1.s1-2', tag: 'linux' },
        { task: 'r2.s1-1', tag: 'linux' },
      ]);
      expect(d.starved).toEqual([]);
    });

    it('honours retryAt: not before it, and at it', () => {
      const w = oneStep(2);
      const attemptId = w.start('r1.s1-0', 'w1');
      w.add(
        subject.task('r1', 's1-0'),
        taskAttemptFailed({ attemptId, workerId: 'w1', retryAt: at(60) }, at(1)),
      );
      expect(
        plan(w.p, [entry('w1', { pulseAt: at(59) })], ms(59), config()).publish.map((p) => p.task),
      ).toEqual(['r1.s1-1']);
      expect(
        plan(w.p, [entry('w1', { pulseAt: at(59) })], ms(60), config()).publish.map((p) => p.task),
      ).toEqual(['r1.s1-0', 'r1.s1-1']);
    });

    it('places a task back from an attempt before later ones (creation order)', () => {
      const w = oneStep(3);
      w.publish('r1.s1-1');
      requeue(w, 'r1.s1-1', 'publish-timeout', 60);
      const d = plan(w.p, [entry('w1', { slots: 3, pulseAt: at(60) })], ms(61), config());
      expect(d.publish.map((p) => p.task)).toEqual(['r1.s1-0', 'r1.s1-1', 'r1.s1-2']);
    });

    it('places nothing for a run not yet submitted or a Waiting step', () => {
      const w = new World().run('r1', [{ id: 's1', tasks: 2 }], { submit: false });
      w.run('r2', [
        { id: 'a', tasks: 1 },
        { id: 'b', tasks: 2, after: ['a'] },
      ]);
      const d = plan(w.p, [entry('w1', { slots: 10 })], ms(1), config());
      expect(d.publish).toEqual([{ task: 'r2.a-0', tag: 'linux' }]);
    });

    it('runs turns until capacity is used up, across batches', () => {
      const w = oneStep(30);
      const d = plan(w.p, [entry('w1', { slots: 20 })], ms(1), config({ batch: 8 }));
      expect(d.publish).toHaveLength(20);
    });
  });

  describe('starvation', () => {
    it('lists a Ready step whose target tags have no eligible worker, and places nothing', () => {
      const w = new World().run('r1', [{ id: 's1', tasks: 2, tags: ['gpu'] }]);
      const d = plan(w.p, [entry('w1')], ms(1), config());
      expect(d).toMatchObject({ publish: [], starved: ['r1.s1'] });
    });

    it('does not call a step starved when its workers are only busy', () => {
      const w = oneStep(3);
      w.start('r1.s1-0', 'w1');
      w.start('r1.s1-1', 'w1');
      const d = plan(w.p, [entry('w1')], ms(1), config());
      expect(d).toMatchObject({ publish: [], starved: [], capacity: { global: 0 } });
    });

    it('does not call a step starved when it has no Pending task', () => {
      const w = new World().run('r1', [{ id: 's1', tasks: 1, tags: ['gpu'] }]);
      w.worker('g1', ['gpu']).start('r1.s1-0', 'g1', 'gpu');
      expect(plan(w.p, [], ms(1), config()).starved).toEqual([]);
    });
  });

  describe('determinism and purity', () => {
    function busyWorld(): World {
      const w = new World();
      for (let i = 0; i < 6; i++) w.worker(`w${i}`, i % 2 ? ['a', 'b'] : ['b'], 3);
      w.run('r1', [
        { id: 's1', tasks: 40, tags: ['a', 'b'], maxConcurrent: 7 },
        { id: 's2', tasks: 40, tags: ['b'] },
        { id: 's3', tasks: 5, tags: ['c'] },
      ]);
      w.start('r1.s1-3', 'w1', 'a');
      w.start('r1.s2-0', 'gone', 'b');
      w.publish('r1.s2-1', 'b');
      return w;
    }
    const live = Array.from({ length: 6 }, (_, i) =>
      entry(`w${i}`, { tags: i % 2 ? ['a', 'b'] : ['b'], slots: 3, pulseAt: at(11 * MIN) }),
    );

    it('gives byte-identical decisions for the same inputs', () => {
      const a = JSON.stringify(plan(busyWorld().p, live, ms(11 * MIN), config({ batch: 3 })));
      const b = JSON.stringify(
        plan(busyWorld().p, [...live].reverse(), ms(11 * MIN), config({ batch: 3 })),
      );
      expect(a).toBe(b);
    });

    it('changes nothing in the projection', () => {
      const w = busyWorld();
      const before = JSON.stringify(replayView(w.p, []));
      const index = JSON.stringify(
        [...w.p.stepIndex].map(([k, v]) => [k, v.counts, [...v.fresh], [...v.returned]]),
      );
      plan(w.p, live, ms(11 * MIN), config());
      expect(JSON.stringify(replayView(w.p, []))).toBe(before);
      expect(
        JSON.stringify(
          [...w.p.stepIndex].map(([k, v]) => [k, v.counts, [...v.fresh], [...v.returned]]),
        ),
      ).toBe(index);
    });
  });
});
