import { describe, expect, it } from 'vitest';
import { rerunFile } from '../../src/cli/rerun-file.js';
import { validateRunFile } from '../../src/run-file.js';
import { at, runCancelled, subject, taskCancelled } from '../helpers/event-builders.js';
import { World } from '../helpers/reconciler-world.js';

describe('rerunFile', () => {
  it('keeps priorities and retry policies, drops delays: a rerun is asked for now', () => {
    const w = new World().run('r1', [
      {
        id: 's1',
        tasks: 2,
        priority: 3,
        delayMs: 60_000,
        retry: { maxAttempts: 5, backoff: 'fixed', initialMs: 250, maxMs: 250, jitter: 0.1 },
        taskOwn: (i) => (i === 1 ? { priority: -4, notBefore: at(90) } : {}),
      },
      { id: 's2', tasks: 1 },
    ]);
    for (const t of ['s1-0', 's1-1', 's2-0'])
      w.add(subject.task('r1', t), taskCancelled({ reason: 'x' }, at(1)));
    w.add(subject.run('r1'), runCancelled({ reason: 'x' }, at(1)));
    const file = rerunFile(w.p, 'r1', 'r2');
    expect(file.steps[0]).toMatchObject({
      id: 's1',
      priority: 3,
      retry: { maxAttempts: 5, backoff: 'fixed', initial: 250, max: 250, jitter: 0.1 },
    });
    expect(file.steps[0]!.tasks).toEqual([
      { id: 's1-0', maxAttempts: 3 },
      { id: 's1-1', maxAttempts: 3, priority: -4 },
    ]);
    expect(JSON.stringify(file)).not.toMatch(/delay|notBefore/);
    expect('priority' in file.steps[1]!).toBe(false);
    expect(() => validateRunFile(file, { maxInputBytes: Infinity })).not.toThrow();
  });
});
