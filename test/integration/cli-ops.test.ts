import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunFile } from '../../src/protocol.js';
import { eventually } from '../helpers/eventually.js';
import { runSonar } from '../helpers/sonar-process.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import {
  killWorkers,
  spawnWorker,
  startTestBackend,
  waitJoined,
} from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();
let tb: TestBackend;
let dir: string;

beforeAll(async () => {
  tb = await startTestBackend(nats.server.url, nats.nc, {}, { reconciler: true });
  dir = await mkdtemp(join(tmpdir(), 'sonar-cli-'));
  spawnWorker(tb.env, ['--worker-id', 'w1', '--tags', 'a', '--slots', '2']);
  await waitJoined(tb.ctx, 'w1');
});
afterAll(async () => {
  await killWorkers();
  await tb?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Runs `sonar <args>` against the test backend; never blocks this process's event loop. */
async function sonar(
  ...args: string[]
): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runSonar('sonar', args, { ...tb.env, NO_COLOR: '1' });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

async function runFile(file: RunFile): Promise<string> {
  const path = join(dir, `${file.runId}.json`);
  await writeFile(path, JSON.stringify(file));
  return path;
}

const ok: RunFile = {
  runId: 'ok',
  steps: [
    {
      id: 'make',
      tags: ['a'],
      output: 'json',
      tasks: [
        { id: 't1', command: ['sh', '-c', `echo '{"n":1}'`] },
        { id: 't2', command: ['sh', '-c', `echo '{"n":2}'`] },
      ],
    },
  ],
};

const bad: RunFile = {
  runId: 'bad',
  steps: [
    {
      id: 'build',
      tags: ['a'],
      tasks: [
        { id: 'good', command: ['echo', 'fine'] },
        {
          id: 'broken',
          command: ['sh', '-c', 'echo "compile error: missing semicolon" >&2; exit 7'],
          maxAttempts: 1,
          input: { file: 'main.c' },
        },
      ],
    },
    { id: 'ship', tags: ['a'], after: ['build'], tasks: [{ id: 'pkg', command: ['echo', 'pkg'] }] },
  ],
};

describe('sonar submit --wait, status, results, rerun', () => {
  it('submit --wait shows progress and exits 0 on a run that succeeds', async () => {
    const r = await sonar('submit', await runFile(ok), '--wait');
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('submitted run ok: 2 tasks');
    expect(r.out).toMatch(/make\s+\[#{20}\]\s+2\/2/);
    expect(r.out).toMatch(/run ok Succeeded\n$/);
  });

  it('submit --wait exits 1 on a failing run and prints what failed and why', async () => {
    const r = await sonar('submit', await runFile(bad), '--wait');
    expect(r.code).toBe(1);
    expect(r.out).toContain('run bad Failed: step build failed');
    expect(r.out).toMatch(/build\.broken\s+Failed\s+exit 7: .*compile error: missing semicolon/);
    expect(r.out).toMatch(/ship\.pkg\s+Cancelled\s+cancelled: step build failed/);
    expect(r.err).toBe('sonar: run bad ended Failed (step build failed)\n');
  });

  it('status --json matches the known state', async () => {
    const r = await sonar('status', '--all', '--json');
    expect(r.code, r.err).toBe(0);
    const v = JSON.parse(r.out) as Record<string, unknown>;
    expect(v).toMatchObject({
      leader: { nodeId: tb.ctx.nodeId },
      workers: [{ workerId: 'w1', tags: ['a'], slots: 2, state: 'active', running: 0 }],
      capacity: { global: 2, tags: { a: 2 }, steps: {} },
      runs: {
        ok: {
          state: 'Succeeded',
          tasks: { Succeeded: 2 },
          steps: { make: { state: 'Succeeded', starved: false, tasks: { Succeeded: 2 } } },
        },
        bad: {
          state: 'Failed',
          tasks: { Succeeded: 1, Failed: 1, Cancelled: 1 },
          steps: {
            build: { state: 'Failed', starved: false, tasks: { Succeeded: 1, Failed: 1 } },
            ship: { state: 'Skipped', starved: false, tasks: { Cancelled: 1 } },
          },
        },
      },
      starved: [],
      finalizeQueue: 0,
      poisoned: 0,
    });
    const w = (v['workers'] as { pulseAgeMs: number }[])[0]!;
    expect(w.pulseAgeMs).toBeLessThan(tb.config.pulseTtlMs);
    // Without --all, only runs with open work are listed: none now.
    expect(JSON.parse((await sonar('status', '--json')).out)).toMatchObject({ runs: {} });
  });

  it('results prints a run and one output; rerun takes the tasks that did not succeed', async () => {
    const list = await sonar('results', 'ok', '--json');
    expect(list.code, list.err).toBe(0);
    expect(JSON.parse(list.out)).toMatchObject({
      runId: 'ok',
      results: [
        { taskId: 't1', stepId: 'make', kind: 'json', json: { n: 1 } },
        { taskId: 't2', stepId: 'make', kind: 'json', json: { n: 2 } },
      ],
    });
    const one = await sonar('results', 'ok', '--task', 't2');
    expect(one.out).toBe('{"n":2}');
    expect((await sonar('results', 'ok', '--task', 'nope')).code).toBe(1);

    const dry = await sonar('rerun', 'bad', '--failed', '--as', 'bad2', '--dry-run');
    expect(dry.code, dry.err).toBe(0);
    expect(JSON.parse(dry.out)).toEqual({
      runId: 'bad2',
      steps: [
        {
          id: 'build',
          tags: ['a'],
          after: [],
          output: 'bytes',
          tasks: [
            {
              id: 'broken',
              command: ['sh', '-c', 'echo "compile error: missing semicolon" >&2; exit 7'],
              input: { file: 'main.c' },
              maxAttempts: 1,
            },
          ],
        },
        {
          id: 'ship',
          tags: ['a'],
          after: ['build'],
          output: 'bytes',
          tasks: [{ id: 'pkg', command: ['echo', 'pkg'], maxAttempts: 3 }],
        },
      ],
    });
    const rerun = await sonar('rerun', 'bad', '--failed', '--as', 'bad2');
    expect(rerun.out).toBe('submitted run bad2: 2 task(s) of bad that did not succeed\n');
    await eventually(() => tb.ctx.loop.projection.runs.get('bad2')?.snapshot.value === 'Failed', {
      timeoutMs: 20_000,
    });
    expect((await sonar('rerun', 'ok', '--failed', '--as', 'ok2')).err).toContain(
      'every task of run ok succeeded: nothing to rerun',
    );
  });
});
