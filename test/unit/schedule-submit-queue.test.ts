import { describe, it, expect } from 'vitest';
import { SubmitQueue } from '../../src/backend/schedules/submit-queue.js';
import type { SubmitJob } from '../../src/backend/schedules/submit-queue.js';
import { eventually } from '../helpers/eventually.js';

/** A job that ends when the test says so. */
function gate() {
  const open = new Map<string, () => void>();
  const started: string[] = [];
  const done: string[] = [];
  const work = (job: SubmitJob) =>
    new Promise<void>((resolve, reject) => {
      started.push(job.runId);
      open.set(job.runId, () => {
        done.push(job.runId);
        if (job.runId.startsWith('bad')) reject(new Error('refused'));
        else resolve();
      });
    });
  return { work, open, started, done };
}

describe('SubmitQueue', () => {
  it('runs at most `concurrency` submits at once, and one slow submit holds none of the others', async () => {
    const g = gate();
    const q = new SubmitQueue(g.work, { concurrency: 2, capacity: 10 });
    for (const runId of ['slow', 'a', 'b', 'c']) q.offer({ schedule: 's', runId });
    await eventually(() => expect(g.started).toEqual(['slow', 'a']));
    g.open.get('a')!();
    await eventually(() => expect(g.started).toEqual(['slow', 'a', 'b']));
    g.open.get('b')!();
    await eventually(() => expect(g.started).toEqual(['slow', 'a', 'b', 'c']));
    g.open.get('c')!();
    await eventually(() => expect(q.size).toBe(1)); // only the slow one
    g.open.get('slow')!();
    await q.stop();
    expect(q.size).toBe(0);
  });

  it('queues a run id once, refuses beyond its capacity, and survives a failing job', async () => {
    const g = gate();
    const q = new SubmitQueue(g.work, { concurrency: 1, capacity: 2 });
    expect(q.offer({ schedule: 's', runId: 'bad1' })).toBe(true);
    await eventually(() => expect(g.started).toEqual(['bad1']));
    expect(q.offer({ schedule: 's', runId: 'bad1' })).toBe(false); // going
    expect(q.offer({ schedule: 's', runId: 'x' })).toBe(true);
    expect(q.offer({ schedule: 's', runId: 'x' })).toBe(false); // waiting
    expect(q.offer({ schedule: 's', runId: 'y' })).toBe(true);
    expect(q.full).toBe(true);
    expect(q.offer({ schedule: 's', runId: 'z' })).toBe(false);
    g.open.get('bad1')!();
    await eventually(() => expect(g.started).toContain('x'));
    g.open.get('x')!();
    await eventually(() => expect(g.started).toContain('y'));
    g.open.get('y')!();
    await eventually(() => expect(g.done).toEqual(['bad1', 'x', 'y']));
    await q.stop();
    expect(q.offer({ schedule: 's', runId: 'w' })).toBe(false); // stopped
    q.restart();
    expect(q.offer({ schedule: 's', runId: 'w' })).toBe(true);
    await eventually(() => expect(g.started).toContain('w'));
    g.open.get('w')!();
    await eventually(() => expect(g.done).toContain('w'));
    await q.stop();
  });
});
