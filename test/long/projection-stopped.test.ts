import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { freePorts } from '../helpers/nats-cluster.js';
import { finishScenario, firstAfter } from '../chaos/scenario.js';
import type { Fault } from '../chaos/scenario.js';
import {
  SLEEP_COMMAND,
  httpStatus,
  longIds,
  saveProcessLogs,
  sleepyRun,
  waitStarted,
} from './long-run.js';
import { worldOnServer } from '../chaos/world-per-file.js';

/** `sonar backend` with a fault hook: SIGUSR2 stops its projection loop with an error. */
const FAULTY = 'test/helpers/faulty-projection-backend-main.ts';
const LONG = 6;
const SHORT = 300;
const RUN = 'projection-stopped';

const chaos = worldOnServer();

describe('long chaos: the leader projection loop stops on its own, with a standby', () => {
  it('the leader exits 1 with one line, the standby leads, the restarted one catches up', async () => {
    const [leaderPort, standbyPort] = await freePorts(2);
    const w = await chaos.world();
    // One at a time: the first provisions the topology, and takes the lead.
    const leader = await w.startBackend({ SONAR_HTTP_PORT: String(leaderPort) }, { main: FAULTY });
    await eventually(async () => (await w.leader()) === leader.nodeId, {
      timeoutMs: 30_000,
      message: 'the faulty backend leads',
    });
    const standby = await w.startBackend({ SONAR_HTTP_PORT: String(standbyPort) });
    await w.startSupervisedWorkers(6, { slots: 4, command: SLEEP_COMMAND });
    await w.submit(sleepyRun(RUN, { long: LONG, longS: 20, short: SHORT, shortS: 0.3 }));
    await waitStarted(w, RUN, longIds(LONG));
    await w.waitFinalized(SHORT * 0.3);

    const fault: Fault = { what: `the leader's projection loop stopped`, at: Date.now() };
    leader.proc.child.kill('SIGUSR2');
    const exit = await Promise.race([
      leader.proc.exited,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('the faulty leader did not exit')), 30_000),
      ),
    ]);
    expect(exit.code, leader.proc.stderr().slice(-2_000)).toBe(1);
    // Its one plain line among the JSON log lines: what stopped, and why.
    const plain = leader.proc
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('sonar: '));
    expect(plain).toHaveLength(1);
    expect(plain[0]).toMatch(/^sonar: the projection loop stopped: fault injected by SIGUSR2: /);

    await eventually(async () => (await w.leader()) === standby.nodeId, {
      timeoutMs: 30_000,
      intervalMs: 100,
      message: 'the standby leads',
    });
    // Its supervisor starts it again: it replays (from the snapshot) and is ready.
    const restarted = await w.startBackend(
      { SONAR_HTTP_PORT: String(leaderPort) },
      { main: FAULTY },
    );
    await eventually(async () => (await httpStatus(leaderPort!, '/readyz')) === 200, {
      timeoutMs: 60_000,
      intervalMs: 200,
      message: 'the restarted backend ready',
    });
    expect(await httpStatus(standbyPort!, '/readyz')).toBe(200);

    const status = await w.waitRunEnded(RUN, 300_000);
    expect(status.state).toBe('Succeeded');
    await saveProcessLogs(w);
    const report = await finishScenario(w, RUN, {
      faults: [fault],
      recovered: firstAfter((e) => e.type === 'ReconcilerElected'),
    });
    expect(report.violations).toEqual([]);
    expect(report.stats.states).toEqual({ Succeeded: LONG + SHORT });
    expect(report.stats.workersLost).toBe(0);
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
    expect(restarted.proc.running, restarted.proc.stderr().slice(-2_000)).toBe(true);
    expect(standby.proc.running, standby.proc.stderr().slice(-2_000)).toBe(true);
  });
});
