import { describe, expect, it } from 'vitest';
import { resolvePlanConfig } from '../../actors/reconciler/config.js';
import { statusText } from '../../src/cli/commands/status.js';
import { statusView } from '../../src/cli/status-view.js';
import { overviewMain } from '../../src/http/dashboard/pages/overview-page.js';
import { runMain } from '../../src/http/dashboard/pages/run-page.js';
import { buildOverview } from '../../src/http/dashboard/views/overview-view.js';
import { buildRunDetail, buildRunList } from '../../src/http/dashboard/views/runs-view.js';
import { at } from '../helpers/event-builders.js';
import { World, ms } from '../helpers/reconciler-world.js';

/** r1: step `now` (2 tasks, one delayed to 60 s), step `later` (3 tasks, held to 120 s). */
function world(): World {
  return new World().run('r1', [
    { id: 'now', tasks: 2, taskOwn: (i) => (i === 1 ? { notBefore: at(60) } : {}) },
    { id: 'later', tasks: 3, after: ['now'], notBefore: at(120) },
  ]);
}

const status = (w: World, s: number) =>
  statusView({
    projection: w.p,
    entries: [],
    now: ms(s),
    planConfig: resolvePlanConfig(),
    finalizeQueue: 0,
    lockHolder: null,
  });

describe('delayed tasks, their own count', () => {
  it('sonar status: per step and per run, Waiting steps too; absent once none is delayed', () => {
    const v = status(world(), 0);
    expect(v.runs['r1']!.delayed).toBe(4);
    expect(v.runs['r1']!.steps['now']).toMatchObject({ tasks: { Pending: 2 }, delayed: 1 });
    expect(v.runs['r1']!.steps['later']).toMatchObject({ state: 'Waiting', delayed: 3 });
    expect(statusText(v, false)).toMatch(/now +Ready +pending 2 +\(1 delayed\)/);
    const after = status(world(), 120);
    expect('delayed' in after.runs['r1']!).toBe(false);
    expect('delayed' in after.runs['r1']!.steps['now']!).toBe(false);
  });

  it('the dashboard: runs, run, steps and the overview', () => {
    const w = world();
    expect(buildRunList(w.p, 10, ms(0))[0]!.delayed).toBe(4);
    const run = buildRunDetail(w.p, 'r1', [], 10, ms(0))!;
    expect(run.steps.map((s) => [s.stepId, s.delayed])).toEqual([
      ['now', 1],
      ['later', 3],
    ]);
    expect(runMain(run, at(0)).value).toContain('1 delayed');
    const overview = buildOverview({
      projection: w.p,
      registry: [],
      now: ms(0),
      pulseTtlMs: 15_000,
      capacityMultiplier: 1,
      finalizeQueue: null,
      lockHolder: null,
    });
    expect(overview.tasks).toMatchObject({ pending: 5, delayed: 4 });
    expect(overviewMain(overview).value).toContain('5 pending (4 delayed)');
  });
});
