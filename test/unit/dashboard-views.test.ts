import { describe, expect, it } from 'vitest';
import { applyEvent, createProjection } from '../../actors/projection.js';
import type { EventRecord, Projection } from '../../actors/projection.js';
import { escapeHtml, html } from '../../src/http/dashboard/html.js';
import { taskMain } from '../../src/http/dashboard/pages/task-page.js';
import { runMain } from '../../src/http/dashboard/pages/run-page.js';
import { overviewMain } from '../../src/http/dashboard/pages/overview-page.js';
import { buildOverview } from '../../src/http/dashboard/views/overview-view.js';
import { publicEvent } from '../../src/http/dashboard/views/public-event.js';
import { buildRunDetail, depthsOf } from '../../src/http/dashboard/views/runs-view.js';
import { buildTaskView } from '../../src/http/dashboard/views/task-view.js';
import {
  at,
  line,
  runSubmitted,
  stepCreated,
  subject,
  taskAttemptFailed,
  taskCreated,
  taskPublished,
  taskRequeued,
  taskStarted,
  workerJoined,
} from '../helpers/event-builders.js';

const EVIL = `"><script>alert('x')</script>`;

/** r1: step s1 (t1 retried after a lost worker, then failed with EVIL), step s2 after s1. */
function world(): { p: Projection; task: EventRecord[]; steps: EventRecord[] } {
  const task = [
    line(3, subject.task(), taskCreated({ input: { secret: 'hunter2' } })),
    line(6, subject.task(), taskPublished({ attempt: 1, attemptId: 'a1', tag: 'linux' }, at(1))),
    line(7, subject.task(), taskStarted({ attemptId: 'a1', workerId: 'w1' }, at(2))),
    line(
      8,
      subject.task(),
      taskRequeued({ attemptId: 'a1', reason: 'worker-lost', recoveries: 1 }, at(3)),
    ),
    line(9, subject.task(), taskPublished({ attempt: 2, attemptId: 'a2', tag: 'linux' }, at(4))),
    line(10, subject.task(), taskStarted({ attemptId: 'a2', workerId: 'w2' }, at(5))),
    line(
      11,
      subject.task(),
      taskAttemptFailed({ attemptId: 'a2', workerId: 'w2', error: EVIL, retryable: false }, at(6)),
    ),
  ];
  const steps = [
    line(1, subject.step('r1', 's1'), stepCreated({ taskCount: 1 })),
    line(2, subject.step('r1', 's2'), stepCreated({ stepId: 's2', after: ['s1'], taskCount: 0 })),
  ];
  const p = createProjection();
  const all = [
    ...steps,
    ...task.slice(0, 1),
    line(4, subject.run(), runSubmitted({ stepIds: ['s1', 's2'], taskCount: 1 })),
    line(
      5,
      subject.worker('w2'),
      workerJoined({ workerId: 'w2', host: EVIL, tags: ['linux'], slots: 4 }),
    ),
    ...task.slice(1),
  ];
  for (const r of all) expect(applyEvent(p, r)).toMatchObject({ ok: true });
  return { p, task, steps };
}

describe('html', () => {
  it('escapes interpolated values, never nested html', () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&\``)).toBe(
      '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;',
    );
    const inner = html`<b>${EVIL}</b>`;
    expect(html`<p>${inner}${[EVIL, null, false, 1]}</p>`.value).toBe(
      `<p><b>${escapeHtml(EVIL)}</b>${escapeHtml(EVIL)}1</p>`,
    );
  });
});

describe('dashboard views', () => {
  it('publicEvent drops the token hash, the input and inline outputs', () => {
    const { task } = world();
    const created = publicEvent(task[0]!);
    expect(created.data).not.toHaveProperty('input');
    expect(created.data['inputBytes']).toBe(JSON.stringify({ secret: 'hunter2' }).length);
    expect(publicEvent(task[1]!).data).not.toHaveProperty('tokenHash');
  });

  it('the task view lists attempts, recoveries with reasons, and the error', () => {
    const { p, task } = world();
    const v = buildTaskView('r1.t1', p.tasks.get('r1.t1')!.snapshot, task);
    expect(v.state).toBe('Failed');
    expect(v.attempts.map((a) => [a.attemptId, a.workerId, a.outcome, a.detail])).toEqual([
      ['a1', 'w1', 'TaskRequeued', 'worker-lost'],
      ['a2', 'w2', 'TaskAttemptFailed', EVIL],
    ]);
    expect(v.recoveryLog).toEqual([
      { time: at(3), type: 'TaskRequeued', reason: 'worker-lost', recoveries: 1 },
    ]);
    expect(JSON.stringify(v)).not.toMatch(/tokenHash|hunter2/);
  });

  it('the run view lays steps out by their after edges', () => {
    const { p, steps } = world();
    const run = buildRunDetail(p, 'r1', steps, 10, Date.parse(at(10)))!;
    expect(run.steps.map((s) => [s.stepId, s.depth, s.state])).toEqual([
      ['s1', 0, 'Ready'],
      ['s2', 1, 'Waiting'],
    ]);
    expect(run.counts.Failed).toBe(1);
    expect(
      depthsOf([
        { id: 'a', after: [] },
        { id: 'b', after: ['a'] },
        { id: 'c', after: ['a', 'b'] },
      ]),
    ).toEqual(
      new Map([
        ['a', 0],
        ['b', 1],
        ['c', 2],
      ]),
    );
  });

  it('lays out a 100k-long after chain without overflowing, and survives a cycle', () => {
    const steps = Array.from({ length: 100_000 }, (_, i) => ({
      id: `s${i}`,
      after: i === 99_999 ? [] : [`s${i + 1}`],
    }));
    expect(depthsOf(steps).get('s0')).toBe(99_999);
    const cyclic = depthsOf([
      { id: 'a', after: ['b'] },
      { id: 'b', after: ['a'] },
    ]);
    expect([...cyclic.keys()].sort()).toEqual(['a', 'b']);
  }, 60_000);

  it('the overview counts capacity per tag from eligible workers', () => {
    const { p } = world();
    const now = Date.parse(at(10));
    const entry = {
      workerId: 'w2',
      host: EVIL,
      tags: ['linux'],
      slots: 4,
      active: true,
      pulseAt: at(9),
      running: [],
    };
    const v = buildOverview({
      projection: p,
      registry: [entry],
      now,
      pulseTtlMs: 15_000,
      capacityMultiplier: 1,
      finalizeQueue: 3,
      lockHolder: null,
    });
    expect(v.workers).toEqual([
      expect.objectContaining({ workerId: 'w2', pulseAgeMs: 1_000, eligible: true, inUse: 0 }),
    ]);
    expect(v.capacity.tags).toEqual([
      { tag: 'linux', total: 4, published: 0, running: 0, free: 4 },
    ]);
    const stale = buildOverview({
      ...inputsOf(p, now),
      registry: [{ ...entry, pulseAt: at(-10) }],
    });
    expect(stale.workers[0]!.eligible).toBe(false);
    expect(stale.capacity.global.total).toBe(0);
  });

  it('renders hostile text escaped on every page', () => {
    const { p, task, steps } = world();
    const now = Date.parse(at(10));
    const pages = [
      taskMain(buildTaskView('r1.t1', p.tasks.get('r1.t1')!.snapshot, task)).value,
      runMain(buildRunDetail(p, 'r1', steps, 10, now)!, at(10)).value,
      overviewMain(buildOverview(inputsOf(p, now))).value,
    ];
    for (const page of pages) expect(page).not.toContain('<script>');
    expect(pages[0]).toContain(escapeHtml(EVIL));
    expect(pages[2]).toContain(escapeHtml(EVIL)); // the worker's host
  });
});

function inputsOf(p: Projection, now: number) {
  return {
    projection: p,
    registry: [],
    now,
    pulseTtlMs: 15_000,
    capacityMultiplier: 1,
    finalizeQueue: null,
    lockHolder: null,
  };
}
