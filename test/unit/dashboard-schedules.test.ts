import { describe, expect, it } from 'vitest';
import { applyEvent, createProjection } from '../../actors/projection.js';
import { schedulesMain } from '../../src/http/dashboard/pages/schedules-page.js';
import { listSchedules } from '../../src/schedules/schedule-info.js';
import {
  at,
  line,
  runSubmitted,
  scheduleCreated,
  scheduleFired,
  subject,
} from '../helpers/event-builders.js';

/** Schedule `nightly` (every 2 s) that fired at 2 s (run submitted) and skipped 4 s (overlap). */
function projection() {
  const p = createProjection();
  const runId = 'nightly-20260101T000002Z';
  const records = [
    line(1, subject.schedule(), scheduleCreated({}, at(0))),
    line(2, subject.schedule(), scheduleFired({ dueAt: at(2) }, at(2))),
    line(3, subject.run(runId), runSubmitted({ runId, stepIds: [], taskCount: 0 }, at(2))),
    line(4, subject.schedule(), scheduleFired({ dueAt: at(4), skipped: 'overlap' }, at(4))),
  ];
  for (const r of records) expect(applyEvent(p, r)).toMatchObject({ ok: true });
  return p;
}

describe('the Schedules page', () => {
  it('lists each schedule with its next due time and its last runs', () => {
    const [info] = listSchedules(projection(), Date.parse(at(4.5)));
    expect(info).toMatchObject({
      name: 'nightly',
      state: 'Active',
      next: at(6),
      lastRun: { runId: 'nightly-20260101T000002Z', runState: 'Running' },
      fires: 2,
      runs: 1,
    });
    expect(info!.recent.map((f) => [f.dueAt, f.runState])).toEqual([
      [at(4), null],
      [at(2), 'Running'],
    ]);
    const page = schedulesMain([info!]).value;
    expect(page).toContain('data-schedule="nightly"');
    expect(page).toContain('href="/runs/nightly-20260101T000002Z"');
    expect(page).toContain('skipped (overlap)');
    expect(page).toContain(`datetime="${at(6)}"`);
    expect(page).not.toContain('"steps"'); // the run template (inputs) is not shown
  });

  it('says how to create one when there is none', () => {
    expect(schedulesMain([]).value).toContain('sonar schedule create');
  });
});
