import { spawn } from 'node:child_process';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import { eventually } from '../helpers/eventually.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { ROOT, SONAR_BIN, startTestBackend } from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/worker-fixtures.js';

let server: NatsServer;
let nc: NatsConnection;
let tb: TestBackend;

beforeAll(async () => {
  server = await startNatsServer();
  nc = await connect({ servers: server.url });
  // The reconciler runs with the default orphanAge (10 min): only `exited` can be that fast.
  tb = await startTestBackend(server.url, nc, {}, { reconciler: true });
});
afterAll(async () => {
  await tb?.stop();
  await nc?.close();
  await server?.stop();
});

describe('sonar workers (supervised liveness, issue 10)', () => {
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

      await new SonarClient(nc, { prefix: ctx.names.prefix }).submit({
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
      // Children drain (SONAR_DRAIN_GRACE 3 s in the fixtures), release the task, and leave.
      expect(await exited).toBe(0);
    }
  });
});
