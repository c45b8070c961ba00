import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { ROOT, SONAR_BIN, startTestBackend } from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();
let tb: TestBackend;

beforeAll(async () => {
  // The reconciler runs with the default orphanAge (10 min): only `exited` can be that fast.
  tb = await startTestBackend(nats.server.url, nats.nc, {}, { reconciler: true });
});
afterAll(async () => {
  await tb?.stop();
});

/**
 * True while `pid` runs: signal 0 reaches it and it is not a zombie. An orphan's zombie waits
 * for init to reap it, and this sandbox's init reaps late, if ever.
 */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

describe('sonar workers (supervised liveness)', () => {
  it('reports a SIGKILLed worker at once: its task is Running elsewhere within 30 s, and a respawned worker joins', async () => {
    const { ctx } = tb;
    expect(ctx.config.orphanAgeMs).toBe(10 * 60_000);
    const sup = spawn(
      process.execPath,
      [
        SONAR_BIN,
        'workers',
        '--count',
        '2',
        '--tags',
        'a',
        '--slots',
        '1',
        '--',
        'sh',
        '-c',
        'sleep 60',
      ],
      { cwd: ROOT, env: { ...process.env, ...tb.env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    sup.stdout.on('data', (c: Buffer) => (out += c.toString()));
    sup.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((resolve) =>
      sup.once('exit', (code) => resolve(code)),
    );
    try {
      const started = () =>
        [...out.matchAll(/worker (\S+) started \(pid (\d+)/g)].map((m) => ({
          id: m[1]!,
          pid: Number(m[2]),
        }));
      const active = (id: string) =>
        ctx.loop.projection.workers.get(id)?.snapshot.value === 'Active';
      const first = await eventually(
        () => started().length === 2 && started().every((w) => active(w.id)) && started(),
        {
          timeoutMs: 30_000,
          message: `two supervised workers joined (stdout: ${out}, stderr: ${err.slice(-500)})`,
        },
      );

      await new SonarClient(nats.nc, { prefix: ctx.names.prefix }).submit({
        runId: 'r1',
        steps: [{ id: 's', tags: ['a'], tasks: [{ id: 't1' }] }],
      });
      const task = () => ctx.loop.projection.tasks.get('r1.t1')!.snapshot;
      await eventually(() => task().value === 'Running', {
        timeoutMs: 20_000,
        message: 'task running',
      });
      const holder = task().context.workerId!;
      const victim = first.find((w) => w.id === holder)!;

      const killedAt = performance.now();
      process.kill(victim.pid, 'SIGKILL');
      await eventually(() => task().value === 'Running' && task().context.workerId !== holder, {
        timeoutMs: 30_000,
        intervalMs: 50,
        message: 'task running on another worker',
      });
      const recoveredInMs = performance.now() - killedAt;
      expect(recoveredInMs).toBeLessThan(30_000);
      expect(ctx.loop.projection.workers.get(holder)?.snapshot.context.lostReason).toBe('exited');
      const events = await ctx.store.readAggregate(ctx.names.subjects.task('r1', 't1'));
      expect(events.find((e) => e.type === 'TaskRequeued')?.data).toMatchObject({
        reason: 'worker-lost',
      });

      // The slot is refilled by a worker with a fresh id.
      const fresh = await eventually(
        () => started().find((w) => !first.some((f) => f.id === w.id) && active(w.id)) ?? false,
        { timeoutMs: 30_000, message: `a respawned worker joined (stdout: ${out})` },
      );
      expect(fresh.id).not.toBe(holder);
      expect(out).toContain(`worker ${holder} exited (signal SIGKILL)`);
      expect(out).toContain(`worker ${holder}: sonar.api.exited answered`);
      console.log(`task running elsewhere ${Math.round(recoveredInMs)} ms after the SIGKILL`);
    } finally {
      sup.kill('SIGTERM');
      // Children drain (SONAR_DRAIN_GRACE 3 s in the fixtures), release the task, leave and
      // exit on their own (their IPC channel does not hold them), with no SIGKILL.
      expect(await exited).toBe(0);
      expect(err).not.toContain('workers did not drain in time');
      const afterStop = out.split('stopping: workers drain\n')[1] ?? '';
      expect(afterStop.match(/exited \(code 0\)/g)).toHaveLength(2);
      expect(afterStop).not.toContain('SIGKILL');
    }
  });
  it('a SIGKILLed supervisor leaves no orphans: each child drains as on SIGTERM, leaves and exits', async () => {
    const { ctx } = tb;
    const sup = spawn(
      process.execPath,
      [SONAR_BIN, 'workers', '--count', '2', '--tags', 'orphans', '--slots', '1'],
      { cwd: ROOT, env: { ...process.env, ...tb.env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    sup.stdout.on('data', (c: Buffer) => (out += c.toString()));
    sup.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const supExited = new Promise<NodeJS.Signals | null>((resolve) =>
      sup.once('exit', (_code, signal) => resolve(signal)),
    );
    const started = () =>
      [...out.matchAll(/worker (\S+) started \(pid (\d+)/g)].map((m) => ({
        id: m[1]!,
        pid: Number(m[2]),
      }));
    const stateOf = (id: string) => ctx.loop.projection.workers.get(id)?.snapshot.value;
    try {
      const children = await eventually(
        () =>
          started().length === 2 && started().every((w) => stateOf(w.id) === 'Active') && started(),
        {
          timeoutMs: 30_000,
          message: `two supervised workers joined (stdout: ${out}, stderr: ${err.slice(-500)})`,
        },
      );
      const ids = children.map((w) => w.id);
      const inRegistry = async () =>
        (await ctx.registry.live()).map((e) => e.workerId).filter((id) => ids.includes(id));
      await eventually(async () => (await inRegistry()).length === 2, {
        message: 'both registry keys put',
      });

      process.kill(sup.pid!, 'SIGKILL');
      expect(await supExited).toBe('SIGKILL');
      expect(children.every((w) => running(w.pid))).toBe(true);

      // Nobody signals the children: they notice the closed IPC channel on their own.
      await eventually(() => children.every((w) => !running(w.pid)), {
        timeoutMs: 30_000,
        intervalMs: 100,
        message: `the orphaned children exited (stderr: ${err.slice(-1000)})`,
      });
      for (const w of children) {
        const types = (await ctx.store.readAggregate(ctx.names.subjects.worker(w.id))).map(
          (e) => e.type,
        );
        // The SIGTERM path: Draining, then Left (not Lost: nobody reported them).
        expect(types).toEqual(['WorkerJoined', 'WorkerDraining', 'WorkerLeft']);
        await eventually(() => stateOf(w.id) === 'Left', { message: `${w.id} Left` });
      }
      expect(await inRegistry()).toEqual([]);
      expect(err.match(/supervisor gone: draining/g)).toHaveLength(2);
    } finally {
      for (const w of started()) {
        if (running(w.pid)) process.kill(w.pid, 'SIGKILL');
      }
      if (sup.exitCode === null && sup.signalCode === null) sup.kill('SIGKILL');
    }
  });
});
