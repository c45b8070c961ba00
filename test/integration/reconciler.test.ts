import { PLANNER_HONORS } from '../../actors/reconciler/honors.js';
import { ReconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import { dispatchTask } from '../../src/backend/reconciler/dispatch.js';
import type { Dispatch } from '../../src/backend/reconciler/reconcile-pass.js';
import { publishDispatch } from '../../streams/queues.js';
import type { BackendContext } from '../../src/backend/context.js';
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import {
  runSubmitted,
  stepCreated,
  taskCreated,
  taskPublished,
  taskResultAccepted,
  taskFinalized,
  taskStarted,
  workerJoined,
} from '../helpers/event-builders.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { eventsOfType, pulse, reconcilerBackendsOn } from '../helpers/reconciler-backend.js';
import { startBackend } from '../helpers/test-backend.js';
import type { TestBackend } from '../helpers/test-backend.js';
import { freshPrefix } from '../helpers/topology.js';

const nats = serverPerFile();
const reconcilers = reconcilerBackendsOn(nats);

/**
 * The reconciler loop against a real server, driven by events appended by hand and registry
 * entries put by hand (DESIGN.md sections 4, 5 and 7, with second-scale timings).
 */
describe('ReconcilerLoop', () => {
  let b: TestBackend;
  let kv: KV;
  let subjects: TestBackend['ctx']['names']['subjects'];
  const timers: NodeJS.Timeout[] = [];

  beforeEach(async () => {
    const prefix = freshPrefix();
    b = await reconcilers.start(prefix);
    kv = await reconcilers.workers(prefix);
    subjects = b.ctx.names.subjects;
    await eventually(() => b.component(ReconcilerLoop).isLeader(), { message: 'leader elected' });
  });

  afterEach(async () => {
    for (const t of timers.splice(0)) clearInterval(t);
    await b.stop();
  });

  /** Keeps a worker's registry entry fresh, as its pulse would. */
  async function keepPulsing(workerId: string, over: Parameters<typeof pulse>[2] = {}) {
    await b.append(
      subjects.worker(workerId),
      workerJoined({ workerId, tags: over.tags ?? ['linux'], slots: over.slots ?? 2 }),
    );
    await pulse(kv, workerId, over);
    timers.push(setInterval(() => void pulse(kv, workerId, over), 300));
  }

  /** One run `r1`, one step `s1` of `count` tasks `t0..` on `tags`. */
  async function submit(count: number, tags = ['linux'], runId = 'r1') {
    await b.append(
      subjects.step(runId, 's1'),
      stepCreated({ runId, stepId: 's1', tags, taskCount: count }),
    );
    for (let i = 0; i < count; i++) {
      await b.append(
        subjects.task(runId, `t${i}`),
        taskCreated({ runId, stepId: 's1', taskId: `t${i}`, tags }),
      );
    }
    return b.append(
      subjects.run(runId),
      runSubmitted({ runId, stepIds: ['s1'], taskCount: count }),
    );
  }

  const stateOf = (key: string) => b.ctx.loop.projection.tasks.get(key)?.snapshot;

  it('appends ReconcilerElected for the leader', async () => {
    const elected = await eventsOfType(b.ctx, subjects.system('reconciler'), 'ReconcilerElected');
    expect(elected.map((e) => e.data)).toEqual([
      { nodeId: b.ctx.nodeId, honors: [...PLANNER_HONORS] },
    ]);
  });

  it('publishes Pending tasks up to capacity and creates dispatch_<tag>', async () => {
    await keepPulsing('w1', { slots: 2 });
    await submit(3);
    await eventually(() => b.ctx.loop.projection.tasksByState.Published.size === 2);
    const published = await eventsOfType(
      b.ctx,
      `${b.ctx.names.prefix}.events.task.r1.*`,
      'TaskPublished',
    );
    expect(published.map((e) => e.subject).sort()).toEqual([
      subjects.task('r1', 't0'),
      subjects.task('r1', 't1'),
    ]);
    expect(published.map((e) => (e.data as { tag: string }).tag)).toEqual(['linux', 'linux']);
    const jsm = await jetstreamManager(nats.nc);
    const consumer = await jsm.consumers.info(b.ctx.names.streams.dispatch, 'dispatch_linux');
    expect(consumer.num_pending).toBe(2);
    // Capacity is used up: the third waits, and is not starved (its worker is only busy).
    await new Promise((r) => setTimeout(r, 500));
    expect(stateOf('r1.t2')?.value).toBe('Pending');
    expect(b.ctx.loop.projection.steps.get('r1.s1')!.snapshot.context.starved).toBe(false);
  });

  it('flags a step starved once, serves it when a worker for its tag comes, then places', async () => {
    await submit(1, ['gpu']);
    await eventually(
      async () =>
        (await eventsOfType(b.ctx, subjects.step('r1', 's1'), 'StepStarved')).length === 1,
    );
    // Several more ticks: still one StepStarved.
    await new Promise((r) => setTimeout(r, 800));
    expect(
      await eventsOfType(b.ctx, subjects.step('r1', 's1'), 'StepStarved', 'StepServed'),
    ).toHaveLength(1);
    await keepPulsing('g1', { tags: ['gpu'], slots: 1 });
    await eventually(() => stateOf('r1.t0')?.value === 'Published');
    // The pass places first, then flags: StepServed follows the publish.
    const steps = () => eventsOfType(b.ctx, subjects.step('r1', 's1'), 'StepStarved', 'StepServed');
    await eventually(async () => (await steps()).length >= 2, { message: 'StepServed' });
    const flags = await steps();
    expect(flags.map((e) => e.type)).toEqual(['StepStarved', 'StepServed']);
    expect(flags[0]!.data).toEqual({ tags: ['gpu'] });
  });

  it('requeues a Running task whose worker vanished, loses the worker, and places the task again', async () => {
    await submit(1, ['linux']);
    // w-gone joined and started t0, then died: its key never appears.
    await b.append(subjects.worker('w-gone'), workerJoined({ workerId: 'w-gone' }));
    await b.append(subjects.task('r1', 't0'), taskPublished({ attemptId: 'old1' }));
    await b.append(
      subjects.task('r1', 't0'),
      taskStarted({ attemptId: 'old1', workerId: 'w-gone' }),
    );
    await eventually(
      async () =>
        (await eventsOfType(b.ctx, subjects.task('r1', 't0'), 'TaskRequeued')).length === 1,
      { timeoutMs: 8_000 },
    );
    const [requeued] = await eventsOfType(b.ctx, subjects.task('r1', 't0'), 'TaskRequeued');
    expect(requeued!.data).toEqual({ attemptId: 'old1', reason: 'worker-lost', recoveries: 1 });
    const [lost] = await eventsOfType(b.ctx, subjects.worker('w-gone'), 'WorkerLost');
    expect(lost!.data).toMatchObject({ reason: 'expired' });
    // A live worker arrives: the task goes out again with a new attempt.
    await keepPulsing('w1');
    await eventually(() => stateOf('r1.t0')?.value === 'Published');
    expect(stateOf('r1.t0')!.context).toMatchObject({ attempt: 2, tag: 'linux' });
    expect(stateOf('r1.t0')!.context.attemptId).not.toBe('old1');
  });

  it('never requeues a long task on a worker that keeps pulsing', async () => {
    await submit(1, ['manual']);
    await keepPulsing('w1', { tags: ['other'], running: ['r1.t0'] }); // it holds the task
    await b.append(subjects.task('r1', 't0'), taskPublished({ attemptId: 'long1', tag: 'manual' }));
    await b.append(subjects.task('r1', 't0'), taskStarted({ attemptId: 'long1', workerId: 'w1' }));
    // Three orphan ages (1.5 s each) go by.
    await new Promise((r) => setTimeout(r, 4_500));
    expect(stateOf('r1.t0')!.value).toBe('Running');
    expect(await eventsOfType(b.ctx, subjects.task('r1', 't0'), 'TaskRequeued')).toEqual([]);
  });

  it('takes back, uncounted, a task its live worker does not list (a start whose reply was lost)', async () => {
    await submit(1, ['manual']);
    await keepPulsing('w1', { tags: ['other'], running: [] }); // alive, holding nothing
    await b.append(subjects.task('r1', 't0'), taskPublished({ attemptId: 'lost1', tag: 'manual' }));
    await b.append(subjects.task('r1', 't0'), taskStarted({ attemptId: 'lost1', workerId: 'w1' }));
    await eventually(
      async () =>
        (await eventsOfType(b.ctx, subjects.task('r1', 't0'), 'TaskRequeued')).length === 1,
      { timeoutMs: 10_000, message: 'the phantom requeued' },
    );
    const [requeued] = await eventsOfType(b.ctx, subjects.task('r1', 't0'), 'TaskRequeued');
    expect(requeued!.data).toMatchObject({
      attemptId: 'lost1',
      reason: 'worker-released',
      recoveries: 0,
    });
  });

  it('requeues a task no worker started within the publish timeout and publishes it anew', async () => {
    await keepPulsing('w1', { slots: 1 });
    await submit(1);
    await eventually(
      async () =>
        (await eventsOfType(b.ctx, subjects.task('r1', 't0'), 'TaskRequeued')).length >= 1,
      { timeoutMs: 8_000 },
    );
    const [requeued] = await eventsOfType(b.ctx, subjects.task('r1', 't0'), 'TaskRequeued');
    expect(requeued!.data).toMatchObject({ reason: 'publish-timeout', recoveries: 0 });
    await eventually(() => (stateOf('r1.t0')?.context.attempt ?? 0) >= 2);
  });

  it('succeeds the step and the run once the task is finalized', async () => {
    await submit(1, ['manual']);
    await b.append(subjects.task('r1', 't0'), taskPublished({ attemptId: 'a1', tag: 'manual' }));
    await b.append(subjects.task('r1', 't0'), taskStarted({ attemptId: 'a1', workerId: 'w1' }));
    await b.append(
      subjects.task('r1', 't0'),
      taskResultAccepted({ attemptId: 'a1', workerId: 'w1' }),
    );
    await b.append(
      subjects.task('r1', 't0'),
      taskFinalized({ attemptId: 'a1', resultKey: 'r1.t0' }),
    );
    await eventually(() => b.ctx.loop.projection.runs.get('r1')?.snapshot.value === 'Succeeded');
    expect(b.ctx.loop.projection.steps.get('r1.s1')!.snapshot.value).toBe('Succeeded');
  });

  it('re-enqueues the finalization job of a Finalizing task whose subject holds none', async () => {
    await submit(1, ['manual']);
    await b.append(subjects.task('r1', 't0'), taskPublished({ attemptId: 'a1', tag: 'manual' }));
    await b.append(subjects.task('r1', 't0'), taskStarted({ attemptId: 'a1', workerId: 'w1' }));
    // The crash between the two writes: accepted, never enqueued.
    await b.append(
      subjects.task('r1', 't0'),
      taskResultAccepted({ attemptId: 'a1', workerId: 'w1', outputInline: 'aGk=', outputBytes: 2 }),
    );
    const jsm = await jetstreamManager(nats.nc);
    const job = await eventually(
      async () => {
        const m = await jsm.streams.getMessage(b.ctx.names.streams.finalize, {
          last_by_subj: subjects.finalize('r1', 't0'),
        });
        if (!m) throw new Error('no job yet');
        return m;
      },
      { timeoutMs: 5_000 },
    );
    expect(job.json()).toEqual({
      runId: 'r1',
      taskId: 't0',
      attemptId: 'a1',
      outputRef: 'inline',
      outputInline: 'aGk=',
    });
    expect(job.header?.get('Nats-Msg-Id')).toBe('fin.r1.t0.a1.0');
  });
});

describe('ReconcilerLoop placement between ticks', () => {
  it('publishes a task submitted to an idle fleet within tens of ms, long before the next tick', async () => {
    const prefix = freshPrefix();
    // The fleet is there first (an idle fleet), then the backend starts with a 3 s tick.
    const b = await reconcilers.start(prefix, {
      env: { SONAR_TICK: '3s', SONAR_LOCK_TTL: '6s', SONAR_PULSE_TTL: '5s' },
    });
    const kv = await reconcilers.workers(prefix);
    const s = b.ctx.names.subjects;
    try {
      await b.append(s.worker('w1'), workerJoined({ workerId: 'w1', slots: 4 }));
      await pulse(kv, 'w1', { slots: 4 });
      await b.stop();
      const again = await reconcilers.start(prefix, {
        env: { SONAR_TICK: '3s', SONAR_LOCK_TTL: '6s', SONAR_PULSE_TTL: '5s' },
      });
      await eventually(() => again.component(ReconcilerLoop).lastSummary !== null, {
        message: 'first tick',
      });
      const latencies: number[] = [];
      for (let i = 0; i < 3; i++) {
        const runId = `idle${i}`;
        await again.append(s.step(runId, 's1'), stepCreated({ runId, stepId: 's1', taskCount: 1 }));
        await again.append(s.task(runId, 't0'), taskCreated({ runId, stepId: 's1', taskId: 't0' }));
        await again.append(s.run(runId), runSubmitted({ runId, stepIds: ['s1'], taskCount: 1 }));
        await eventually(
          () => again.ctx.loop.projection.tasks.get(`${runId}.t0`)?.snapshot.value === 'Published',
          { intervalMs: 2, timeoutMs: 2_500 },
        );
        const [submitted] = await eventsOfType(again.ctx, s.run(runId), 'RunSubmitted');
        const [published] = await eventsOfType(again.ctx, s.task(runId, 't0'), 'TaskPublished');
        latencies.push(Date.parse(published!.time) - Date.parse(submitted!.time));
      }
      console.log(`submit-to-publish on an idle fleet (server time): ${latencies.join(', ')} ms`);
      for (const ms of latencies) expect(ms).toBeLessThan(500);
      await again.stop();
    } finally {
      await b.stop().catch(() => {});
    }
  });
});

describe('ReconcilerLoop after a restart', () => {
  it('does not requeue the tasks of live workers, even one whose key is briefly missing (age floor)', async () => {
    const prefix = freshPrefix();
    const first = await reconcilers.start(prefix);
    const kv = await reconcilers.workers(prefix);
    const s = first.ctx.names.subjects;
    let pulsing = true;
    const timer = setInterval(() => {
      if (pulsing) void pulse(kv, 'w1', { tags: ['other'], running: ['r1.t0'] });
    }, 300);
    try {
      await first.append(s.worker('w1'), workerJoined({ workerId: 'w1', tags: ['other'] }));
      await pulse(kv, 'w1', { tags: ['other'], running: ['r1.t0'] });
      await first.append(s.step('r1', 's1'), stepCreated({ tags: ['manual'], taskCount: 1 }));
      await first.append(s.task('r1', 't0'), taskCreated({ taskId: 't0', tags: ['manual'] }));
      await first.append(s.run('r1'), runSubmitted({ taskCount: 1 }));
      await first.append(s.task('r1', 't0'), taskPublished({ attemptId: 'a1', tag: 'manual' }));
      await first.append(s.task('r1', 't0'), taskStarted({ attemptId: 'a1', workerId: 'w1' }));
      // Running for longer than orphanAge (1.5 s) on a live worker.
      await new Promise((r) => setTimeout(r, 2_000));
      await first.stop();

      // The worker's key goes missing across the restart (its pulses did not get through),
      // and comes back 500 ms after the new backend started: less than one pulse TTL (1 s).
      pulsing = false;
      await kv.delete('w1');
      const second = await reconcilers.start(prefix);
      try {
        await eventually(() => second.component(ReconcilerLoop).lastSummary !== null, {
          message: 'first tick',
        });
        await new Promise((r) => setTimeout(r, 500));
        pulsing = true;
        await pulse(kv, 'w1', { tags: ['other'], running: ['r1.t0'] });
        await new Promise((r) => setTimeout(r, 2_000));
        expect(second.ctx.loop.projection.tasks.get('r1.t0')!.snapshot.value).toBe('Running');
        expect(await eventsOfType(second.ctx, s.task('r1', 't0'), 'TaskRequeued')).toEqual([]);
        expect(await eventsOfType(second.ctx, s.worker('w1'), 'WorkerLost')).toEqual([]);
      } finally {
        await second.stop();
      }
    } finally {
      clearInterval(timer);
    }
  });
});

describe('ReconcilerLoop and Published tasks without a dispatch message', () => {
  // The publish timeout is left at 10 min: nothing here may wait for it.
  const slowTimeout = { env: { SONAR_PUBLISH_TIMEOUT: '10m' } };
  const timers: NodeJS.Timeout[] = [];
  afterEach(() => {
    for (const t of timers.splice(0)) clearInterval(t);
  });

  async function pulsing(prefix: string): Promise<void> {
    const kv = await reconcilers.workers(prefix);
    await pulse(kv, 'w1', { slots: 4 });
    timers.push(setInterval(() => void pulse(kv, 'w1', { slots: 4 }), 300));
  }

  it('a new leader requeues at once the task its predecessor appended but never sent, and only it', async () => {
    const prefix = freshPrefix();
    // The predecessor, by hand (no reconciler of its own to judge meanwhile): two tasks
    // Published, the message of t1 sent, that of t0 not.
    const first = await startBackend({
      url: nats.server.url,
      nc: nats.nc,
      prefix,
      components: [],
      handlers: 'none',
      outputs: 'none',
    });
    const s = first.ctx.names.subjects;
    await first.append(s.worker('w1'), workerJoined({ workerId: 'w1', tags: ['linux'], slots: 4 }));
    await first.append(s.step('r1', 's1'), stepCreated({ tags: ['linux'], taskCount: 2 }));
    for (const t of ['t0', 't1']) {
      await first.append(s.task('r1', t), taskCreated({ taskId: t, tags: ['linux'] }));
    }
    await first.append(s.run('r1'), runSubmitted({ taskCount: 2 }));
    await first.append(s.task('r1', 't0'), taskPublished({ attemptId: 'a0' }));
    await first.append(s.task('r1', 't1'), taskPublished({ attemptId: 'a1' }));
    const body = { runId: 'r1', stepId: 's1', taskId: 't1', attempt: 1, attemptId: 'a1' };
    await publishDispatch(first.ctx.publisher, first.ctx.names, 'linux', { ...body, token: 'x' });
    await first.stop();

    await pulsing(prefix);
    const second = await reconcilers.start(prefix, slowTimeout);
    try {
      const task = (id: string) => second.ctx.loop.projection.tasks.get(`r1.${id}`)!.snapshot;
      await eventually(() => task('t0').context.attempt === 2 && task('t0').value === 'Published', {
        message: 't0 published again',
      });
      const requeued = await eventsOfType(second.ctx, s.task('r1', '*'), 'TaskRequeued');
      expect(requeued.map((e) => [e.subject, e.data])).toEqual([
        [s.task('r1', 't0'), { attemptId: 'a0', reason: 'publish-timeout', recoveries: 0 }],
      ]);
      expect(task('t1')).toMatchObject({ value: 'Published', context: { attemptId: 'a1' } });
    } finally {
      await second.stop();
    }
  });

  it('a leader whose send failed after the append requeues the task on its next pass', async () => {
    const prefix = freshPrefix();
    let failed = 0;
    // The first send of all is lost after its TaskPublished was appended.
    const dispatch: Dispatch = async (ctx, taskKey, tag) => {
      if (failed++ > 0) return dispatchTask(ctx, taskKey, tag);
      const lost = () => Promise.reject(new Error('send lost'));
      const publisher = new Proxy(ctx.publisher, {
        get: (target, key): unknown => (key === 'publish' ? lost : Reflect.get(target, key)),
      });
      return dispatchTask(
        Object.assign(Object.create(ctx) as BackendContext, { publisher }),
        taskKey,
        tag,
      );
    };
    const b = await reconcilers.start(prefix, { ...slowTimeout, loop: { dispatch } });
    try {
      await pulsing(prefix);
      const s = b.ctx.names.subjects;
      await b.append(s.worker('w1'), workerJoined({ workerId: 'w1', tags: ['linux'], slots: 4 }));
      await b.append(s.step('r1', 's1'), stepCreated({ tags: ['linux'], taskCount: 1 }));
      await b.append(s.task('r1', 't0'), taskCreated({ taskId: 't0', tags: ['linux'] }));
      await b.append(s.run('r1'), runSubmitted({ taskCount: 1 }));
      const task = () => b.ctx.loop.projection.tasks.get('r1.t0')!.snapshot;
      await eventually(() => task().context.attempt === 2 && task().value === 'Published', {
        message: 't0 published again',
      });
      expect(failed).toBe(2);
      const requeued = await eventsOfType(b.ctx, s.task('r1', 't0'), 'TaskRequeued');
      expect(requeued.map((e) => e.data)).toMatchObject([{ reason: 'publish-timeout' }]);
    } finally {
      await b.stop();
    }
  });
});
