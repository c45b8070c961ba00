import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startSecureNats } from '../helpers/secure-nats.js';
import type { SecureNats } from '../helpers/secure-nats.js';
import { killAll } from '../helpers/sonar-process.js';
import { freshPrefix } from '../helpers/topology.js';
import { finalizingAgain, finishScenario } from './scenario.js';
import type { Fault } from './scenario.js';
import { ChaosWorld, chaosRun } from './world.js';

const TASKS = 500;
/** Long enough that every client sees the connection drop and pulses fail. */
const DOWN_MS = 2_000;

let secure: SecureNats;
let world: ChaosWorld | undefined;

beforeAll(async () => {
  // Secure mode, its credentials made for this file's one world.
  secure = await startSecureNats({ prefix: freshPrefix() });
});
afterAll(async () => {
  await world?.stop();
  await killAll();
  await secure?.stop();
});

describe('chaos: the single nats-server SIGKILLed mid-run, restarted on its port and store', () => {
  it('every process reconnects and the run completes with nothing lost', async () => {
    const startedAt = Date.now();
    const w = (world = await ChaosWorld.start({ secure }));
    await w.startBackend();
    // Supervised: a worker fenced off as lost exits and is replaced (see the README).
    await w.waitWorkersLive(Array.from({ length: 6 }, () => w.startWorker({ supervise: true })));
    await w.submit(chaosRun('kill-server', TASKS));
    await w.waitFinalized(TASKS * 0.3);

    const faults: Fault[] = [{ what: `SIGKILL nats-server, down ${DOWN_MS} ms`, at: Date.now() }];
    await secure.server.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, DOWN_MS));
    await secure.server.restart();

    const status = await w.waitRunEnded('kill-server');
    expect(status.state).toBe('Succeeded');
    const report = await finishScenario(w, 'server-restart', {
      faults,
      recovered: finalizingAgain(),
      startedAt,
    });
    expect(report.violations).toEqual([]);
    expect(report.stats.states).toEqual({ Succeeded: TASKS });
    // Nobody gave up: the backend reconnected, and so did every worker not fenced off.
    const backend = w.backends[0]!.proc;
    expect(backend.running, backend.stderr().slice(-2_000)).toBe(true);
    await eventually(() => w.workers.filter((p) => p.running).length === 6, {
      message: 'six workers running (replacements included)',
    });
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
  });
});
