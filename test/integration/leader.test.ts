import { PLANNER_HONORS } from '../../actors/reconciler/honors.js';
import { ReconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import { describe, it, expect } from 'vitest';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { LeaderLock } from '../../src/backend/reconciler/leader-lock.js';
import { runSubmitted, stepCreated, taskCreated, workerJoined } from '../helpers/event-builders.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { eventsOfType, pulse, reconcilerBackendsOn } from '../helpers/reconciler-backend.js';
import { freshPrefix, freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();
const reconcilers = reconcilerBackendsOn(nats);

describe('LeaderLock', () => {
  const TTL = 1_000;

  async function locks() {
    const n = await freshTopology(nats.nc, { lockTtlMs: TTL });
    return new Kvm(nats.nc).open(n.buckets.locks);
  }

  it('lets one holder in; a holder that stops renewing stops acting before its lock expires', async () => {
    const kv = await locks();
    let clock = 0;
    const a = new LeaderLock({
      kv,
      nodeId: 'a',
      lockTtlMs: TTL,
      tickMs: 200,
      monotonic: () => clock,
    });
    const b = new LeaderLock({ kv, nodeId: 'b', lockTtlMs: TTL, tickMs: 200 });
    expect(await a.acquireOrRenew()).toMatchObject({ leader: true, elected: true });
    expect(await b.acquireOrRenew()).toMatchObject({ leader: false, elected: false });
    expect(await a.acquireOrRenew()).toMatchObject({ leader: true, elected: false });
    expect((await kv.get('reconciler'))?.string()).toBe('a');

    // a stops renewing: it must stop acting (margin = min(tick, ttl/4) = 200 ms) before the
    // lock can expire, while the key still stands and b cannot take it yet.
    clock += TTL - a.marginMs;
    expect(a.isLeader()).toBe(true);
    clock += 1;
    expect(a.isLeader()).toBe(false);
    expect(await b.acquireOrRenew()).toMatchObject({ leader: false });

    // The bucket TTL releases it; b takes over, and a cannot renew a lock it lost.
    await eventually(async () => (await b.acquireOrRenew()).leader, { timeoutMs: 3_000 });
    expect(await a.acquireOrRenew()).toMatchObject({ leader: false });
    expect((await kv.get('reconciler'))?.string()).toBe('b');
  });

  it('hands the lock over at once on release', async () => {
    const kv = await locks();
    const a = new LeaderLock({ kv, nodeId: 'a', lockTtlMs: TTL, tickMs: 200 });
    const b = new LeaderLock({ kv, nodeId: 'b', lockTtlMs: TTL, tickMs: 200 });
    await a.acquireOrRenew();
    await a.release();
    expect(a.isLeader()).toBe(false);
    expect(await b.acquireOrRenew()).toMatchObject({ leader: true, elected: true });
  });

  it('samples the server clock offset from its own writes', async () => {
    const kv = await locks();
    const skewed = new LeaderLock({
      kv,
      nodeId: 'a',
      lockTtlMs: TTL,
      tickMs: 200,
      wall: () => Date.now() - 60_000,
    });
    const turn = await skewed.acquireOrRenew();
    // The server runs on this machine's clock: the offset undoes the 60 s skew.
    // The error is at most half the write's round trip (plus millisecond timestamps).
    const { offsetMs, roundTripMs } = turn.clock!;
    expect(Math.abs(offsetMs - 60_000)).toBeLessThanOrEqual(roundTripMs / 2 + 3);
  });
});

describe('reconciler failover', () => {
  it('a standby takes over within lock TTL + one tick when the leader dies, and keeps placing', async () => {
    const prefix = freshPrefix();
    const ncA = await connect({ servers: nats.server.url });
    const ncB = await connect({ servers: nats.server.url });
    const a = await reconcilers.start(prefix, { nodeId: 'node-a' }, ncA);
    await eventually(() => a.component(ReconcilerLoop).isLeader(), { message: 'a leads' });
    const b = await reconcilers.start(prefix, { nodeId: 'node-b' }, ncB);
    try {
      // Several ticks: b stays standby while a renews.
      await new Promise((r) => setTimeout(r, 600));
      expect(b.component(ReconcilerLoop).isLeader()).toBe(false);
      expect(a.component(ReconcilerLoop).isLeader()).toBe(true);

      // a dies (its connection is gone: no renewal, no writes).
      const killedAt = performance.now();
      await ncA.close();
      const { lockTtlMs, tickMs } = b.ctx.config;
      await eventually(() => b.component(ReconcilerLoop).isLeader(), {
        intervalMs: 10,
        timeoutMs: 5_000,
      });
      const tookMs = performance.now() - killedAt;
      console.log(
        `failover took ${Math.round(tookMs)} ms (lock TTL ${lockTtlMs} ms, tick ${tickMs} ms)`,
      );
      expect(tookMs).toBeLessThan(lockTtlMs + tickMs + 250);
      expect(a.component(ReconcilerLoop).isLeader()).toBe(false);

      // The new term is recorded (appended just after the lock is won).
      const elected = await eventually(async () => {
        const events = await eventsOfType(
          b.ctx,
          b.ctx.names.subjects.system('reconciler'),
          'ReconcilerElected',
        );
        return events.length === 2 && events;
      });
      // Each announces what its planner honors, so a submit can tell an older leader.
      const honors = [...PLANNER_HONORS];
      expect(elected.map((e) => e.data)).toEqual([
        { nodeId: 'node-a', honors },
        { nodeId: 'node-b', honors },
      ]);

      // The new leader places work.
      const kv = await reconcilers.workers(prefix, ncB);
      const s = b.ctx.names.subjects;
      await b.append(s.worker('w1'), workerJoined({ workerId: 'w1' }));
      await pulse(kv, 'w1');
      await b.append(s.step('r1', 's1'), stepCreated({ taskCount: 1 }));
      await b.append(s.task('r1', 't0'), taskCreated({ taskId: 't0' }));
      await b.append(s.run('r1'), runSubmitted({ taskCount: 1 }));
      await eventually(
        () => b.ctx.loop.projection.tasks.get('r1.t0')?.snapshot.value === 'Published',
      );
    } finally {
      await b.stop();
      await a.stop().catch(() => {});
      await ncB.close();
    }
  });
});
