import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { finalizingAgain, finishClean } from './scenario.js';
import type { Fault } from './scenario.js';
import { chaosRun } from './world.js';
import { worldOnServer } from './world-per-file.js';

const TASKS = 500;
/** Long enough that every client sees the connection drop and pulses fail. */
const DOWN_MS = 2_000;

const chaos = worldOnServer();

describe('chaos: the single nats-server SIGKILLed mid-run, restarted on its port and store', () => {
  it('every process reconnects and the run completes with nothing lost', async () => {
    const w = await chaos.running(chaosRun('kill-server', TASKS), { backends: 1, workers: 6 });
    await w.waitFinalized(TASKS * 0.3);

    const faults: Fault[] = [{ what: `SIGKILL nats-server, down ${DOWN_MS} ms`, at: Date.now() }];
    await chaos.secure.server.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, DOWN_MS));
    await chaos.secure.server.restart();

    const report = await finishClean(w, 'kill-server', 'server-restart', {
      faults,
      recovered: finalizingAgain(),
      tasks: TASKS,
    });
    // Nobody gave up: the backend reconnected, and so did every worker not fenced off.
    const backend = w.backends[0]!.proc;
    expect(backend.running, backend.stderr().slice(-2_000)).toBe(true);
    await eventually(() => w.workers.filter((p) => p.running).length === 6, {
      message: 'six workers running (replacements included)',
    });
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
  });
});
