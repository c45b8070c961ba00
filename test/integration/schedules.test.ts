import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ScheduleFired } from '../../actors/schedule/schedule.events.js';
import { scheduledRunId } from '../../actors/schedule/schedule-run-ids.js';
import type { ScheduleInfo } from '../../src/schedules/schedule-info.js';
import type { ApiClient } from '../../src/worker/api-client.js';
import { isApiError } from '../../src/worker/api-client.js';
import type { RequestOf } from '../../src/protocol.js';
import { eventually } from '../helpers/eventually.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { runSonar } from '../helpers/sonar-process.js';
import { startScheduleBackend } from '../helpers/schedule-backend.js';
import type { TestBackend } from '../helpers/test-backend.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

/**
 * Schedules on a real nats-server and a real backend (reconciler and firer, no workers: the
 * runs a schedule submits stay Running, which is what `overlap: skip` is judged on).
 */
const nats = serverPerFile();
let tb: TestBackend;
let api: ApiClient;
const { log, lines } = recordingLogger();

const template = { steps: [{ id: 's1', tags: ['nowhere'], tasks: [{ id: 't1' }] }] };

beforeAll(async () => {
  ({ tb, api } = await startScheduleBackend(nats, log));
});
afterAll(async () => {
  await tb?.stop();
});

const create = (req: Omit<RequestOf<'schedule.create'>, 'run'>) =>
  api.request<'schedule.create', ScheduleInfo>('schedule.create', { run: template, ...req });

const list = async (name: string): Promise<ScheduleInfo> =>
  (await api.request<'schedule.list', { schedules: ScheduleInfo[] }>('schedule.list', { name }))
    .schedules[0]!;

/** The schedule's `ScheduleFired` events as stored, in order. */
async function firesOf(name: string): Promise<ScheduleFired['data'][]> {
  const records = await tb.ctx.store.readAggregate(tb.ctx.names.subjects.schedule(name));
  return records
    .filter((r) => r.type === 'ScheduleFired')
    .map((r) => r.data as ScheduleFired['data']);
}

async function refusal(work: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await work;
  } catch (err: unknown) {
    if (isApiError(err)) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error('accepted');
}

describe('schedules with a real backend', () => {
  it('an interval schedule fires once per due time, each with its deterministic run, submitted whole', async () => {
    const created = await create({ name: 'every1s', everyMs: 1000, overlap: 'allow' });
    expect(created).toMatchObject({ name: 'every1s', state: 'Active', everyMs: 1000, fires: 0 });
    expect(Date.parse(created.next!) % 1000).toBe(0);
    const fires = await eventually(
      async () => {
        const f = await firesOf('every1s');
        return f.length >= 3 && f;
      },
      { timeoutMs: 15_000, message: 'three fires' },
    );
    const due = fires.map((f) => Date.parse(f.dueAt));
    for (let i = 1; i < due.length; i++) expect(due[i]! - due[i - 1]!).toBe(1000);
    for (const f of fires) {
      expect(f).toMatchObject({
        trigger: 'due',
        missed: 0,
        runId: scheduledRunId('every1s', Date.parse(f.dueAt)),
      });
      expect(f.skipped).toBeUndefined();
    }
    await eventually(() => fires.every((f) => tb.ctx.loop.projection.runs.has(f.runId)), {
      message: 'every fired run submitted',
    });
    const info = await list('every1s');
    expect(info.lastRun?.runState).toBe('Running');
    expect(info.runs).toBeGreaterThanOrEqual(3);
    await api.request('schedule.delete', { name: 'every1s' });
  });

  it('overlap skip records a skipped fire while the last run is still running', async () => {
    await create({ name: 'overlap', everyMs: 1000 });
    const fires = await eventually(
      async () => {
        const f = await firesOf('overlap');
        return f.length >= 3 && f;
      },
      { timeoutMs: 15_000, message: 'three fires' },
    );
    expect(fires[0]!.skipped).toBeUndefined();
    expect(fires.slice(1).every((f) => f.skipped === 'overlap')).toBe(true);
    expect(tb.ctx.loop.projection.runs.has(fires[1]!.runId)).toBe(false);
    await api.request('schedule.delete', { name: 'overlap' });
  });

  it('pause stops the fires, trigger fires anyway, resume fires again, delete ends it', async () => {
    await create({ name: 'ops', everyMs: 1000, overlap: 'allow' });
    await eventually(async () => (await firesOf('ops')).length >= 1, { timeoutMs: 10_000 });
    const paused = await api.request<'schedule.pause', ScheduleInfo>('schedule.pause', {
      name: 'ops',
    });
    expect(paused).toMatchObject({ state: 'Paused', next: null });
    // Pausing twice is the same answer.
    expect(await api.request('schedule.pause', { name: 'ops' })).toMatchObject({ state: 'Paused' });
    const before = (await firesOf('ops')).length;
    const triggered = await api.request<'schedule.trigger', { runId: string; submitted: boolean }>(
      'schedule.trigger',
      { name: 'ops', requestId: 'trigger1' },
    );
    expect(triggered.runId).toMatch(/^ops-\d{8}T\d{6}Z-manual$/);
    expect(triggered.submitted).toBe(true);
    // The same request again (a lost answer) fires nothing more.
    await api.request('schedule.trigger', { name: 'ops', requestId: 'trigger1' });
    // What is shown is an absence (no due fire while paused): two due times must pass.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const whilePaused = await firesOf('ops');
    expect(whilePaused.length).toBe(before + 1);
    expect(whilePaused.at(-1)).toMatchObject({ trigger: 'manual', runId: triggered.runId });
    expect(tb.ctx.loop.projection.runs.has(triggered.runId)).toBe(true);
    const resumedAt = Date.now();
    await api.request('schedule.resume', { name: 'ops' });
    const after = await eventually(
      async () => {
        const f = await firesOf('ops');
        return f.length > whilePaused.length && f;
      },
      { timeoutMs: 10_000, message: 'a fire after resume' },
    );
    // No due time of the pause is run later.
    expect(Date.parse(after[whilePaused.length]!.dueAt)).toBeGreaterThan(resumedAt - 1000);
    const deleted = await api.request<'schedule.delete', ScheduleInfo>('schedule.delete', {
      name: 'ops',
    });
    expect(deleted.state).toBe('Deleted');
    const { schedules } = await api.request<'schedule.list', { schedules: ScheduleInfo[] }>(
      'schedule.list',
      {},
    );
    expect(schedules.map((s) => s.name)).not.toContain('ops');
    expect(await refusal(api.request('schedule.resume', { name: 'ops' }))).toMatchObject({
      code: 'illegal_transition',
    });
  });

  it('refuses bad settings, keeps a repeated create idempotent, and refuses other settings', async () => {
    expect(await refusal(create({ name: 'bad', cron: 'every day' }))).toMatchObject({
      code: 'validation',
      message: expect.stringContaining("'cron'") as string,
    });
    expect(
      await refusal(create({ name: 'bad', cron: '0 2 * * *', timezone: 'Mars/Olympus' })),
    ).toMatchObject({ code: 'validation' });
    expect(
      await refusal(
        api.request('schedule.create', {
          name: 'bad',
          everyMs: 60_000,
          run: { runId: 'x', ...template },
        }),
      ),
    ).toMatchObject({
      code: 'validation',
      message: expect.stringContaining("'run.runId'") as string,
    });
    expect(await refusal(create({ name: 'bad', everyMs: 1500 }))).toMatchObject({
      code: 'validation',
    });
    expect(
      await refusal(create({ name: 'bad', everyMs: 1000, missedAfterMs: 30 * 86_400_000 })),
    ).toMatchObject({
      code: 'validation',
      message: expect.stringMatching(/^'missedAfterMs' is 2592000000 ms, over the bound/) as string,
    });
    const first = await create({ name: 'nightly', cron: '0 2 * * *', timezone: 'Europe/Paris' });
    expect(first.next).toMatch(/T0[01]:00:00.000Z$/);
    const again = await create({ name: 'nightly', cron: '0 2 * * *', timezone: 'Europe/Paris' });
    expect(again.createdAt).toBe(first.createdAt);
    expect(await refusal(create({ name: 'nightly', cron: '0 3 * * *' }))).toMatchObject({
      code: 'conflict',
    });
    expect(await refusal(api.request('schedule.pause', { name: 'nope' }))).toMatchObject({
      code: 'not_found',
    });
  });

  it('a schedule whose due times cannot be computed here is logged by name; the others fire on', async () => {
    // Stored by a backend whose time zone data knows this zone; this one does not.
    await tb.ctx.store.append(
      tb.ctx.names.subjects.schedule('martian'),
      {
        id: 'create.martian',
        type: 'ScheduleCreated',
        data: { name: 'martian', cron: '* * * * * *', timezone: 'Mars/Olympus', run: template },
      },
      { expectedSeq: 0 },
    );
    await eventually(() => tb.ctx.loop.projection.schedules.has('martian'));
    await create({ name: 'earthly', everyMs: 1000, overlap: 'allow' });
    await eventually(async () => (await firesOf('earthly')).length >= 3, {
      timeoutMs: 15_000,
      message: 'earthly fires beside martian',
    });
    const warned = lines.find((l) => l.msg === 'schedule not fired') as
      { schedule?: string } | undefined;
    expect(warned?.schedule).toBe('martian');
    expect(await list('martian')).toMatchObject({ name: 'martian', state: 'Active', next: null });
    await api.request('schedule.delete', { name: 'martian' });
    await api.request('schedule.delete', { name: 'earthly' });
  });

  it('the CLI creates and lists schedules through the API', async () => {
    const file = join(tmpdir(), `sched-${process.pid}.json`);
    writeFileSync(file, JSON.stringify(template));
    const env = { SONAR_NATS_URL: nats.server.url, SONAR_PREFIX: tb.ctx.names.prefix };
    const made = await runSonar(
      'schedule create',
      ['schedule', 'create', 'cli', '--every', '1h', '--run', file, '--catch-up', 'none', '--json'],
      env,
    );
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(made.stdout)).toMatchObject({
      name: 'cli',
      everyMs: 3_600_000,
      catchUp: 'none',
    });
    const listed = await runSonar('schedule list', ['schedule', 'list'], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/^cli {2}Active {2}every 1h/m);
    expect(listed.stdout).toContain('  next  ');
    const usage = await runSonar(
      'schedule create',
      ['schedule', 'create', 'x', '--run', file],
      env,
    );
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('exactly one of --cron and --every');
  });
});
