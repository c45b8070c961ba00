import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ScheduleFired, ScheduleRunRefused } from '../../actors/schedule/schedule.events.js';
import { SonarClient } from '../../src/client/client.js';
import type { ScheduleInfo } from '../../src/schedules/schedule-info.js';
import type { ApiClient } from '../../src/worker/api-client.js';
import type { RequestOf } from '../../src/protocol.js';
import { eventually } from '../helpers/eventually.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { startScheduleBackend } from '../helpers/schedule-backend.js';
import type { TestBackend } from '../helpers/test-backend.js';

/**
 * Scheduled runs whose submit is refused for longer than the fires a schedule shows
 * (`overloaded`: the open tasks are at SONAR_MAX_OPEN_TASKS), then admitted: every fired run
 * ends up submitted, or skipped by its policy, and the schedules keep firing; a run refused
 * for good (a template over this leader's SONAR_MAX_INPUT) is recorded once. No workers:
 * runs stay Running.
 */
const nats = serverPerFile();
let tb: TestBackend;
let api: ApiClient;
let client: SonarClient;
const { log, lines } = recordingLogger();

const MAX_OPEN = 200;
const template = { steps: [{ id: 's1', tags: ['nowhere'], tasks: [{ id: 't1' }] }] };

beforeAll(async () => {
  ({ tb, api } = await startScheduleBackend(nats, log, {
    SONAR_MAX_OPEN_TASKS: String(MAX_OPEN),
    SONAR_MAX_INPUT: '1KiB',
  }));
  client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix });
});
afterAll(async () => {
  await tb?.stop();
});

const create = (req: Omit<RequestOf<'schedule.create'>, 'run'>) =>
  api.request<'schedule.create', ScheduleInfo>('schedule.create', { run: template, ...req });

async function eventsOf<T>(name: string, type: string): Promise<T[]> {
  const records = await tb.ctx.store.readAggregate(tb.ctx.names.subjects.schedule(name));
  return records.filter((r) => r.type === type).map((r) => r.data as T);
}
const firesOf = (name: string) => eventsOf<ScheduleFired['data']>(name, 'ScheduleFired');

describe('scheduled runs refused for more fires than a schedule shows', () => {
  it('are all submitted once admitted, and the schedules fire on', async () => {
    const p = () => tb.ctx.loop.projection;
    // Fill the open tasks: every scheduled submit is refused `overloaded`.
    const tasks = Array.from({ length: MAX_OPEN }, (_, i) => ({ id: `t${i}` }));
    await client.submit({ runId: 'blocker', steps: [{ id: 's1', tags: ['nowhere'], tasks }] });
    await create({ name: 'skipper', everyMs: 1000 });
    await create({ name: 'allower', everyMs: 1000, overlap: 'allow' });
    await create({ name: 'leaver', everyMs: 1000, overlap: 'allow' });
    // Deleted while its runs are refused: the runs it fired are still owed.
    await eventually(async () => (await firesOf('leaver')).length >= 3, { timeoutMs: 15_000 });
    await api.request('schedule.delete', { name: 'leaver' });
    const owedByLeaver = (await firesOf('leaver')).filter((f) => f.skipped === undefined);
    expect(owedByLeaver.some((f) => p().runs.has(f.runId))).toBe(false);

    // More than the 10 fires a schedule lists come and go while refused.
    await eventually(
      async () =>
        (await firesOf('skipper')).length >= 12 && (await firesOf('allower')).length >= 12,
      { timeoutMs: 30_000, message: 'twelve fires each while submits are refused' },
    );
    const skipFires = await firesOf('skipper');
    expect(skipFires[0]!.skipped).toBeUndefined();
    expect(skipFires.slice(1).every((f) => f.skipped === 'overlap')).toBe(true);
    const owedByAllower = (await firesOf('allower')).filter((f) => f.skipped === undefined);
    expect(owedByAllower.length).toBeGreaterThanOrEqual(12);
    expect(owedByAllower.some((f) => p().runs.has(f.runId))).toBe(false);
    expect(lines.some((l) => l.msg === 'scheduled run not submitted yet')).toBe(true);

    // Admitted again: the owed runs are submitted, the oldest too (out of the recent fires).
    await client.cancel('blocker');
    await eventually(() => p().runs.has(skipFires[0]!.runId), {
      timeoutMs: 30_000,
      message: "skipper's first run submitted",
    });
    await eventually(() => owedByAllower.every((f) => p().runs.has(f.runId)), {
      timeoutMs: 30_000,
      message: 'every run allower fired while refused is submitted',
    });

    await eventually(() => owedByLeaver.every((f) => p().runs.has(f.runId)), {
      timeoutMs: 30_000,
      message: 'every run the deleted schedule fired is submitted',
    });

    // The skipping schedule is not stuck: once its run ends, a later fire runs again.
    await client.cancel(skipFires[0]!.runId);
    const ran = await eventually(
      async () => {
        const later = (await firesOf('skipper')).slice(skipFires.length);
        return later.find((f) => f.skipped === undefined) ?? false;
      },
      { timeoutMs: 15_000, message: 'skipper fires a run again' },
    );
    await eventually(() => p().runs.has(ran.runId), { timeoutMs: 15_000 });
    const all = await firesOf('allower');
    await eventually(
      () => all.filter((f) => f.skipped === undefined).every((f) => p().runs.has(f.runId)),
      { timeoutMs: 30_000, message: "all of allower's runs submitted" },
    );
    expect(await eventsOf<ScheduleRunRefused['data']>('allower', 'ScheduleRunRefused')).toEqual([]);
    await api.request('schedule.delete', { name: 'skipper' });
    await api.request('schedule.delete', { name: 'allower' });
  }, 120_000);

  it('a run refused for good is recorded once, and overlap skip fires runs again', async () => {
    // Created by a backend with a larger SONAR_MAX_INPUT: this leader refuses its runs.
    const big = {
      steps: [
        { id: 's1', tags: ['nowhere'], tasks: [{ id: 't1', input: { pad: 'x'.repeat(2048) } }] },
      ],
    };
    await tb.ctx.store.append(
      tb.ctx.names.subjects.schedule('toobig'),
      {
        id: 'create.toobig',
        type: 'ScheduleCreated',
        data: { name: 'toobig', everyMs: 1000, run: big },
      },
      { expectedSeq: 0 },
    );
    const refusals = await eventually(
      async () => {
        const r = await eventsOf<ScheduleRunRefused['data']>('toobig', 'ScheduleRunRefused');
        return r.length >= 2 && r;
      },
      { timeoutMs: 15_000, message: 'two runs refused for good' },
    );
    expect(refusals[0]).toMatchObject({ code: 'validation' });
    expect(new Set(refusals.map((r) => r.runId)).size).toBe(refusals.length);
    const fired = (await firesOf('toobig')).filter((f) => f.skipped === undefined);
    expect(fired.length).toBeGreaterThanOrEqual(2); // not stuck skipping behind a refused run
    const info = (
      await api.request<'schedule.list', { schedules: ScheduleInfo[] }>('schedule.list', {
        name: 'toobig',
      })
    ).schedules[0]!;
    expect(info.refusedRuns).toBeGreaterThanOrEqual(2);
    expect(info.lastRefused).toMatchObject({ code: 'validation' });
    expect(lines.some((l) => l.msg === 'scheduled run refused for good')).toBe(true);
    await api.request('schedule.delete', { name: 'toobig' });
  });
});
