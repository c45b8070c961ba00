import { describe, it, expect } from 'vitest';
import { ReconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import { runSubmitted, stepCreated, taskCreated, workerJoined } from '../helpers/event-builders.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { eventsOfType, pulse, reconcilerBackendsOn } from '../helpers/reconciler-backend.js';
import { freshPrefix } from '../helpers/topology.js';

const nats = serverPerFile();
const reconcilers = reconcilerBackendsOn(nats);

/**
 * How far the leader's clock (this machine's, corrected by its estimate of the server's offset)
 * may sit ahead of the server's time stamps: the bucket counts in server time, and a decision
 * taken at `now` lands at a server time a little later, never earlier, but for that estimate.
 */
const CLOCK_SLACK_MS = 50;

describe('per-tag rate limits with a real backend', () => {
  it('the leader announces its rates and never publishes to a tag over its rate in any window', async () => {
    const prefix = freshPrefix();
    const b = await reconcilers.start(prefix, {
      nodeId: 'node-r',
      env: { SONAR_TAG_RATES: 'api=2/s', SONAR_PUBLISH_TIMEOUT: '1m' },
    });
    try {
      await eventually(() => b.component(ReconcilerLoop).isLeader(), { message: 'leads' });
      const s = b.ctx.names.subjects;
      const elected = await eventually(async () => {
        const events = await eventsOfType(b.ctx, s.system('reconciler'), 'ReconcilerElected');
        return events.length === 1 && events;
      });
      expect(elected[0]!.data).toMatchObject({ nodeId: 'node-r', tagRates: 'api=2/s' });

      const kv = await reconcilers.workers(prefix);
      await b.append(s.worker('w1'), workerJoined({ workerId: 'w1', tags: ['api', 'linux'] }));
      await pulse(kv, 'w1', { tags: ['api', 'linux'], slots: 20 });
      const TASKS = 7;
      await b.append(
        s.step('r1', 'calls'),
        stepCreated({ stepId: 'calls', tags: ['api'], taskCount: TASKS }),
      );
      await b.append(s.step('r1', 'local'), stepCreated({ stepId: 'local', taskCount: 3 }));
      for (let i = 0; i < TASKS; i++) {
        await b.append(
          s.task('r1', `c${i}`),
          taskCreated({ stepId: 'calls', taskId: `c${i}`, tags: ['api'] }),
        );
      }
      for (let i = 0; i < 3; i++) {
        await b.append(s.task('r1', `l${i}`), taskCreated({ stepId: 'local', taskId: `l${i}` }));
      }
      await b.append(
        s.run('r1'),
        runSubmitted({ stepIds: ['calls', 'local'], taskCount: TASKS + 3 }),
      );
      const keepPulsing = setInterval(
        () => void pulse(kv, 'w1', { tags: ['api', 'linux'], slots: 20 }),
        300,
      );
      try {
        // The local step is not held back by the limited one: all three go at once.
        await eventually(() =>
          [0, 1, 2].every(
            (i) => b.ctx.loop.projection.tasks.get(`r1.l${i}`)?.snapshot.value === 'Published',
          ),
        );
        const published = await eventually(
          async () => {
            const events = await eventsOfType(b.ctx, s.task('r1', '*'), 'TaskPublished');
            const api = events.filter((e) => (e.data as { tag: string }).tag === 'api');
            return api.length === TASKS && api;
          },
          { timeoutMs: 10_000 },
        );
        const times = published.map((e) => Date.parse(e.time)).sort((x, y) => x - y);
        // 2/s: any two publishes apart from the one before them are at least a second apart.
        for (let i = 2; i < times.length; i++) {
          expect(times[i]! - times[i - 2]!).toBeGreaterThanOrEqual(1_000 - CLOCK_SLACK_MS);
        }
        // And the limit is a ceiling, not a stall: 7 at 2/s took about 3 s, well under 10.
        expect(times.at(-1)! - times[0]!).toBeLessThan(6_000);
      } finally {
        clearInterval(keepPulsing);
      }
    } finally {
      await b.stop();
    }
  }, 30_000);

  it('places again as soon as a token comes back, not at the next tick', async () => {
    const prefix = freshPrefix();
    const b = await reconcilers.start(prefix, {
      nodeId: 'node-t',
      env: {
        SONAR_TAG_RATES: 'api=2/500ms',
        SONAR_PUBLISH_TIMEOUT: '1m',
        SONAR_TICK: '4s',
        SONAR_LOCK_TTL: '12s',
        // A prompt pass reads the registry of the last tick: pulses must stay recent that long.
        SONAR_PULSE_TTL: '10s',
      },
    });
    try {
      await eventually(() => b.component(ReconcilerLoop).isLeader(), { message: 'leads' });
      const s = b.ctx.names.subjects;
      const kv = await reconcilers.workers(prefix);
      await b.append(s.worker('w1'), workerJoined({ workerId: 'w1', tags: ['api'] }));
      await pulse(kv, 'w1', { tags: ['api'], slots: 20 });
      const TASKS = 6;
      await b.append(
        s.step('r1', 'calls'),
        stepCreated({ stepId: 'calls', tags: ['api'], taskCount: TASKS }),
      );
      for (let i = 0; i < TASKS; i++) {
        await b.append(
          s.task('r1', `c${i}`),
          taskCreated({ stepId: 'calls', taskId: `c${i}`, tags: ['api'] }),
        );
      }
      const keepPulsing = setInterval(
        () => void pulse(kv, 'w1', { tags: ['api'], slots: 20 }),
        300,
      );
      await b.append(s.run('r1'), runSubmitted({ stepIds: ['calls'], taskCount: TASKS }));
      const published = await eventually(
        async () => {
          const events = await eventsOfType(b.ctx, s.task('r1', '*'), 'TaskPublished');
          return events.length === TASKS && events;
        },
        { timeoutMs: 12_000 },
      ).finally(() => clearInterval(keepPulsing));
      const times = published.map((e) => Date.parse(e.time)).sort((x, y) => x - y);
      for (let i = 2; i < times.length; i++) {
        expect(times[i]! - times[i - 2]!).toBeGreaterThanOrEqual(500 - CLOCK_SLACK_MS);
      }
      // Three bursts of two, 500 ms apart: within one 4 s tick, not three ticks.
      const since = times.map((t) => t - times[0]!);
      expect(since.at(-1)!, `publishes at +${since.join(', +')} ms`).toBeLessThan(2_500);
    } finally {
      await b.stop();
    }
  }, 30_000);
});
