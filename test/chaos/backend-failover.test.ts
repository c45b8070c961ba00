import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { finishClean, firstAfter } from './scenario.js';
import type { Fault } from './scenario.js';
import { chaosRun } from './world.js';
import type { Backend } from './world.js';
import { worldOnServer } from './world-per-file.js';

const TASKS = 500;

const chaos = worldOnServer();

describe('chaos: the leading backend SIGKILLed twice, with a standby', () => {
  it('a standby takes the lead each time and the run completes', async () => {
    const w = await chaos.running(chaosRun('kill-leader', TASKS), { backends: 2, workers: 6 });

    const faults: Fault[] = [];
    for (const progress of [0.25, 0.6]) {
      await w.waitFinalized(Math.floor(TASKS * progress));
      const leaderId = await eventually(() => w.leader().then((l) => l ?? false));
      const leader = w.backends.find((b) => b.nodeId === leaderId && b.proc.running);
      if (!leader) throw new Error(`the leader ${leaderId} is not one of this world's backends`);
      faults.push({ what: `SIGKILL leader ${leader.proc.name}`, at: Date.now() });
      await leader.proc.kill('SIGKILL');
      // Another backend takes the lock once its TTL frees it (SONAR_LOCK_TTL 1 s).
      await eventually(
        async () => {
          const now = await w.leader();
          return now !== null && now !== leaderId;
        },
        { timeoutMs: 30_000, intervalMs: 100, message: 'a new leader' },
      );
      // The killed backend's replacement becomes the next standby.
      const standby: Backend = await w.startBackend();
      expect(standby.nodeId).not.toBe(leaderId);
    }

    const report = await finishClean(w, 'kill-leader', 'backend-failover', {
      faults,
      recovered: firstAfter((e) => e.type === 'ReconcilerElected'),
      tasks: TASKS,
    });
    // The first election, then one per kill.
    expect(report.stats.elections).toBeGreaterThanOrEqual(3);
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
  });
});
