import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import type { RunFile } from '../../src/protocol.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { tempDirPerFile } from '../helpers/temp-dir-per-file.js';
import { eventsOf, ROOT, runFileOf, SONAR_BIN, spawnWorker } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);
const dir = tempDirPerFile('sonar-e2e');

/** Runs `sonar submit FILE --wait --json` to its end. */
async function submitAndWait(env: Record<string, string>, file: RunFile) {
  const path = join(dir(), `${file.runId}.json`);
  await writeFile(path, JSON.stringify(file));
  const child = spawn(process.execPath, [SONAR_BIN, 'submit', path, '--wait', '--json'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, out, err };
}

describe('end to end: submit --wait, the reconciler, a worker process, finalization', () => {
  it('runs a two-step run to success and exits 0', async () => {
    const tb = await backends.start({}, { reconciler: true });
    spawnWorker(tb.env, ['--worker-id', 'w1', '--tags', 'linux', '--slots', '2']);
    await eventually(() => tb.ctx.loop.projection.workers.get('w1')?.snapshot.value === 'Active', {
      timeoutMs: 15_000,
    });
    const r = await submitAndWait(tb.env, {
      runId: 'e2e',
      steps: [
        {
          id: 'make',
          tags: ['linux'],
          output: 'json',
          tasks: [1, 2, 3].map((i) => ({
            id: `m${i}`,
            command: ['sh', '-c', `echo '{"n":${i}}'`],
          })),
        },
        {
          id: 'use',
          tags: ['linux'],
          after: ['make'],
          tasks: [{ id: 'u1', command: ['cat'], input: { from: 'make' } }],
        },
      ],
    });
    expect(r, r.err).toMatchObject({ code: 0 });
    const lines = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toEqual({ runId: 'e2e', taskCount: 4 });
    expect(lines[1]).toMatchObject({ state: 'Succeeded', tasks: { Succeeded: 4 } });
  });

  it('exits 1 when the run fails', async () => {
    const tb = await backends.start({}, { reconciler: true });
    spawnWorker(tb.env, ['--worker-id', 'w1', '--tags', 'linux', '--slots', '1']);
    const r = await submitAndWait(tb.env, {
      runId: 'e2e-fail',
      steps: [
        {
          id: 's',
          tags: ['linux'],
          tasks: [{ id: 'f', command: ['sh', '-c', 'exit 7'], maxAttempts: 1 }],
        },
      ],
    });
    expect(r.code, r.err).toBe(1);
    expect(r.err).toMatch(/sonar: run e2e-fail ended Failed/);
  });
});

describe('a dispatch consumer deleted under a joined worker', () => {
  it('is recreated at the request of the worker, and its tasks start without a restart', async () => {
    const tb = await backends.start({}, { reconciler: true });
    const { ctx } = tb;
    const n = ctx.names;
    const worker = spawnWorker(tb.env, ['--worker-id', 'w1', '--tags', 'linux', '--slots', '2']);
    await eventually(() => ctx.loop.projection.workers.get('w1')?.snapshot.value === 'Active', {
      timeoutMs: 15_000,
    });
    const client = new SonarClient(nats.nc, { prefix: n.prefix });
    const succeeded = (runId: string, count: number) => () =>
      [...ctx.loop.projection.tasks.values()].filter(
        (t) => t.snapshot.context.spec.runId === runId && t.snapshot.value === 'Succeeded',
      ).length === count;
    // The leader publishes to `linux` once: it has made sure of the consumer and trusts that.
    await client.submit(
      runFileOf('r1', [{ id: 's', tags: ['linux'], count: 2, command: ['true'] }]),
    );
    await eventually(succeeded('r1', 2), { timeoutMs: 20_000 });

    // What the sweep does to a tag nobody advertised for a day, racing this worker's join.
    const jsm = await jetstreamManager(nats.nc);
    expect(await jsm.consumers.delete(n.streams.dispatch, n.consumers.dispatch('linux'))).toBe(
      true,
    );

    await client.submit(
      runFileOf('r2', [{ id: 's', tags: ['linux'], count: 3, command: ['true'] }]),
    );
    await eventually(succeeded('r2', 3), { timeoutMs: 30_000 });
    expect(worker.child.exitCode).toBeNull(); // the same process, never restarted
    await expect(
      jsm.consumers.info(n.streams.dispatch, n.consumers.dispatch('linux')),
    ).resolves.toBeTruthy();
    expect(worker.stderr()).toMatch(/dispatch consumer gone: joining again/);
    // Joined once: the join sent again appends nothing.
    const joins = (await eventsOf(ctx, n.subjects.worker('w1'))).filter(
      (e) => e.type === 'WorkerJoined',
    );
    expect(joins).toHaveLength(1);
  });
});
