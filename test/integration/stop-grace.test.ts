import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { jetstream } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { enqueueFinalization } from '../../streams/queues.js';
import { StillStoppingError } from '../../src/backend/straggler-guard.js';
import { SonarClient } from '../../src/client/client.js';
import { createWorker } from '../../src/worker/worker.js';
import { eventually } from '../helpers/eventually.js';
import { startPoolBackend } from '../helpers/finalize-backend.js';
import {
  InstrumentedSink,
  openWriter,
  seedFinalizing,
  stateOf,
} from '../helpers/finalize-fixtures.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshTopology } from '../helpers/topology.js';
import { dispatchRun, runFileOf, startTestBackend, taskOf } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const children = new Set<ChildProcess>();

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

const GRACE_MS = 2_000;
const LEASE_MS = 2_000;

describe('bounded shutdown', () => {
  it('a backend whose finalizer is stuck in a 60 s sink write exits within SONAR_STOP_GRACE on SIGTERM; another backend finalizes the job after its lease', async () => {
    const n = await freshTopology(nats.nc, { finalizeLeaseMs: LEASE_MS });
    const w = await openWriter(nats.nc, n);
    try {
      const [job] = await seedFinalizing(w.writer, n, { runId: 'r1', taskIds: ['t1'] });
      await enqueueFinalization(jetstream(nats.nc), n, job!);
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'test/helpers/stuck-sink-backend-main.ts'],
        {
          env: {
            ...process.env,
            SONAR_NATS_URL: nats.server.url,
            SONAR_PREFIX: n.prefix,
            SONAR_FINALIZE_LEASE: `${LEASE_MS}ms`,
            SONAR_STOP_GRACE: `${GRACE_MS}ms`,
            SONAR_LOG_LEVEL: 'info',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      children.add(child);
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr
        .setEncoding('utf8')
        .on('data', (d: string) => (stderr = (stderr + d).slice(-20_000)));
      const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
      // Both: the pool may reach the sink before the process handles SIGTERM, which it does
      // once started (a signal before that ends it the default way).
      await eventually(
        () => stdout.includes('sink write started r1.t1') && stdout.includes('backend started'),
        { timeoutMs: 20_000, message: `the child's finalizer reached the sink\n${stderr}` },
      );

      const signalled = performance.now();
      child.kill('SIGTERM');
      const [code] = await exited;
      const tookMs = performance.now() - signalled;
      children.delete(child);
      console.log(`backend exited ${Math.round(tookMs)} ms after SIGTERM (grace ${GRACE_MS} ms)`);
      // The grace, plus what a process needs to close a socket and end.
      expect(tookMs, stderr).toBeLessThan(GRACE_MS + 1_000);
      expect(code).toBe(0);
      expect(stderr).toContain('stop grace ran out: left running');
      expect(stderr).toContain('"component":"finalizer"');
      expect(stateOf(w.loop, 'r1', 't1')).toBe('Finalizing');

      // The job's lease ran out with the process: another backend finalizes it.
      const sink = new InstrumentedSink(null);
      const b = await startPoolBackend(nats.nc, nats.server.url, n, {
        sink,
        env: { SONAR_FINALIZE_LEASE: `${LEASE_MS}ms` },
      });
      try {
        await eventually(() => stateOf(w.loop, 'r1', 't1') === 'Succeeded', { timeoutMs: 15_000 });
        expect(sink.callsFor('r1.t1')).toHaveLength(1);
      } finally {
        await b.stop();
      }
    } finally {
      await w.stop();
    }
  });

  it('a component left running by a bounded stop refuses to start again until its straggler ends', async () => {
    const n = await freshTopology(nats.nc, { finalizeLeaseMs: LEASE_MS });
    const w = await openWriter(nats.nc, n);
    const sink = new InstrumentedSink(null);
    let release!: () => void;
    sink.hold = new Promise<void>((resolve) => (release = resolve));
    const b = await startPoolBackend(nats.nc, nats.server.url, n, {
      sink,
      env: { SONAR_FINALIZE_LEASE: `${LEASE_MS}ms`, SONAR_STOP_GRACE: '300ms' },
    });
    try {
      const [job] = await seedFinalizing(w.writer, n, { runId: 'r1', taskIds: ['t1'] });
      await enqueueFinalization(jetstream(nats.nc), n, job!);
      await eventually(() => sink.writes.now === 1);
      const stopping = performance.now();
      await b.stop();
      expect(performance.now() - stopping).toBeLessThan(1_000);
      expect(b.backend.stragglers).toEqual(['finalizer']);
      // Still holding its job: a second copy of the pool must not start beside it.
      await expect(b.component(FinalizerPool).start()).rejects.toBeInstanceOf(StillStoppingError);
      release();
      await eventually(() => stateOf(w.loop, 'r1', 't1') === 'Succeeded');
      await eventually(async () => {
        await b.component(FinalizerPool).start();
        return true;
      });
      await b.component(FinalizerPool).stop();
    } finally {
      release();
      await w.stop();
    }
  });

  it('a draining worker whose backend is gone stops within SONAR_STOP_GRACE of its drain deadline', async () => {
    const tb = await startTestBackend(nats.server.url, nats.nc);
    const { ctx } = tb;
    await new SonarClient(nats.nc, { prefix: ctx.names.prefix }).submit(
      runFileOf('r1', [{ id: 's', tags: ['a'], count: 1 }]),
    );
    const worker = createWorker({
      tags: ['a'],
      nc: nats.nc,
      prefix: ctx.names.prefix,
      drainGraceMs: '200ms',
      killGraceMs: '100ms',
      stopGraceMs: '1s',
      spot: false,
      // Ignores its abort: the worker abandons it after the kill grace.
      handler: () => new Promise(() => {}),
    });
    try {
      await worker.start();
      await dispatchRun(ctx, 'r1');
      await eventually(() => taskOf(ctx, 'r1', 't0').value === 'Running');
      // The backend goes away: release and leave get no answer, and would retry for 10 s each.
      await tb.stop();
      const draining = performance.now();
      await worker.drain();
      const tookMs = performance.now() - draining;
      // Drain request and deadline (0.2 s each), then at most the stop grace (1 s).
      expect(tookMs).toBeLessThan(3_000);
      expect(worker.state).toBe('Stopped');
    } finally {
      if (worker.state === 'Running') await worker.drain().catch(() => {});
    }
  });
});
