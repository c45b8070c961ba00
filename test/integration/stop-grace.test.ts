import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { jetstream } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { enqueueFinalization } from '../../streams/queues.js';
import { StillStoppingError } from '../../src/backend/straggler-guard.js';
import { SonarClient } from '../../src/client/client.js';
import { createWorker } from '../../src/worker/worker.js';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedSink } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import { spawnNode } from '../helpers/sonar-process.js';
import { dispatchRun, runFileOf, startTestBackend, taskOf } from '../helpers/worker-fixtures.js';

const world = finalizeWorldPerFile();
const { nats } = world;

const GRACE_MS = 2_000;
const LEASE_MS = 2_000;

describe('bounded shutdown', () => {
  it('a backend whose finalizer is stuck in a 60 s sink write exits within SONAR_STOP_GRACE on SIGTERM; another backend finalizes the job after its lease', async () => {
    const s = await world.scene({ finalizeLeaseMs: LEASE_MS });
    const { n } = s;
    const [job] = await s.seed({ runId: 'r1', taskIds: ['t1'] });
    await enqueueFinalization(jetstream(nats.nc), n, job!);
    const child = spawnNode(
      'stuck-sink backend',
      ['--import', 'tsx', 'test/helpers/stuck-sink-backend-main.ts'],
      {
        SONAR_NATS_URL: nats.server.url,
        SONAR_PREFIX: n.prefix,
        SONAR_FINALIZE_LEASE: `${LEASE_MS}ms`,
        SONAR_STOP_GRACE: `${GRACE_MS}ms`,
      },
    );
    // Both: the pool may reach the sink before the process handles SIGTERM, which it does
    // once started (a signal before that ends it the default way).
    await eventually(
      () =>
        child.stdout().includes('sink write started r1.t1') &&
        child.stdout().includes('backend started'),
      { timeoutMs: 20_000, message: `the child's finalizer reached the sink\n${child.stderr()}` },
    );

    const signalled = performance.now();
    const { code } = await child.kill('SIGTERM');
    const tookMs = performance.now() - signalled;
    const stderr = child.stderr();
    console.log(`backend exited ${Math.round(tookMs)} ms after SIGTERM (grace ${GRACE_MS} ms)`);
    // The grace, plus what a process needs to close a socket and end.
    expect(tookMs, stderr).toBeLessThan(GRACE_MS + 1_000);
    expect(code).toBe(0);
    expect(stderr).toContain('stop grace ran out: left running');
    expect(stderr).toContain('"component":"finalizer"');
    expect(s.stateOf('r1', 't1')).toBe('Finalizing');

    // The job's lease ran out with the process: another backend finalizes it.
    const sink = new InstrumentedSink(null);
    await s.startPool({ sink, env: { SONAR_FINALIZE_LEASE: `${LEASE_MS}ms` } });
    await eventually(() => s.stateOf('r1', 't1') === 'Succeeded', { timeoutMs: 15_000 });
    expect(sink.callsFor('r1.t1')).toHaveLength(1);
  });

  it('a component left running by a bounded stop refuses to start again until its straggler ends', async () => {
    const s = await world.scene({ finalizeLeaseMs: LEASE_MS });
    const sink = new InstrumentedSink(null);
    let release!: () => void;
    sink.hold = new Promise<void>((resolve) => (release = resolve));
    const b = await s.startPool({
      sink,
      env: { SONAR_FINALIZE_LEASE: `${LEASE_MS}ms`, SONAR_STOP_GRACE: '300ms' },
    });
    try {
      const [job] = await s.seed({ runId: 'r1', taskIds: ['t1'] });
      await enqueueFinalization(jetstream(nats.nc), s.n, job!);
      await eventually(() => sink.writes.now === 1);
      const stopping = performance.now();
      await b.stop();
      expect(performance.now() - stopping).toBeLessThan(1_000);
      expect(b.backend.stragglers).toEqual(['finalizer']);
      // Still holding its job: a second copy of the pool must not start beside it.
      await expect(b.component(FinalizerPool).start()).rejects.toBeInstanceOf(StillStoppingError);
      release();
      await eventually(() => s.stateOf('r1', 't1') === 'Succeeded');
      await eventually(async () => {
        await b.component(FinalizerPool).start();
        return true;
      });
      await b.component(FinalizerPool).stop();
    } finally {
      release();
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
