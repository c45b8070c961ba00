import { describe, expect, it } from 'vitest';
import { killFinalizersInWaves } from './finalizer-kills.js';
import { finalizingAgain, finishClean } from './scenario.js';
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

    // Kill one finalizer pool, then the other, then both at once; new backends replace them.
    const faults = await killFinalizersInWaves(w, TASKS);

    const report = await finishClean(w, 'burst', 'finalizers-killed', {
      faults,
      recovered: finalizingAgain(),
      tasks: TASKS,
    });
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
  });
});
