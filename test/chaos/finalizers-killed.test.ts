import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { finalizingAgain, finishScenario } from './scenario.js';
import type { Fault } from './scenario.js';
import { chaosRun } from './world.js';
import { worldOnServer } from './world-per-file.js';

const TASKS = 600;

const chaos = worldOnServer();

describe('chaos: a burst of results while the finalizers are SIGKILLed', () => {
  it('finalizes every accepted result exactly once', async () => {
    // One finalizer lane per backend against 24 busy slots: results arrive faster than they
    // are finalized, so the queue holds a backlog and jobs are in hand at every kill.
    const w = await chaos.running(chaosRun('burst', TASKS), {
      env: { SONAR_FINALIZERS: '1' },
      backends: 2,
      workers: 6,
      slots: 4,
    });

    const jsm = await jetstreamManager(w.nc);
    const backlog = async (): Promise<number> =>
      (await jsm.streams.info(w.n.streams.finalize)).state.messages;
    const faults: Fault[] = [];
    // Kill one finalizer pool, then the other, then both at once; new backends replace them.
    for (const [progress, count] of [
      [0.2, 1],
      [0.4, 1],
      [0.6, 2],
    ] as const) {
      await w.waitFinalized(Math.floor(TASKS * progress));
      const victims = w.backends.filter((b) => b.proc.running).slice(0, count);
      const queued = await backlog();
      faults.push({
        what: `SIGKILL ${victims.map((v) => v.proc.name).join(',')} (${queued} jobs queued)`,
        at: Date.now(),
      });
      await Promise.all(victims.map((v) => v.proc.kill('SIGKILL')));
      await w.startBackends(victims.length);
    }

    const status = await w.waitRunEnded('burst');
    expect(status.state).toBe('Succeeded');
    const report = await finishScenario(w, 'finalizers-killed', {
      faults,
      recovered: finalizingAgain(),
    });
    expect(report.violations).toEqual([]);
    expect(report.stats.states).toEqual({ Succeeded: TASKS });
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
  });
});
