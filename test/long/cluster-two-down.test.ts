import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { finalizingAgain, finishScenario } from '../chaos/scenario.js';
import type { Fault } from '../chaos/scenario.js';
import {
  SLEEP_COMMAND,
  longIds,
  saveProcessLogs,
  sleepyRun,
  waitReplicasCurrent,
  waitStarted,
} from './long-run.js';
import { worldOnCluster } from '../chaos/world-per-file.js';

const LONG = 12;
const SHORT = 300;
const DOWN_MS = 60_000;
const RUN = 'cluster-two-down';

const chaos = worldOnCluster(3);

describe('long chaos: a 3-node cluster, SONAR_REPLICAS=3, 2 nodes SIGKILLed and down 60 s', () => {
  it('JetStream waits for its quorum, then the run completes with nothing lost', async () => {
    // The long tasks outlast the outage.
    const run = sleepyRun(RUN, {
      long: LONG,
      longS: DOWN_MS / 1_000 + 10,
      short: SHORT,
      shortS: 0.5,
    });
    const w = await chaos.running(run, {
      // As in cluster-leader.test.ts: elections take seconds, a 3 s pulse TTL is too short.
      env: { SONAR_REPLICAS: '3', SONAR_PULSE_TTL: '5s', SONAR_ORPHAN_AGE: '5s' },
      backends: 2,
      workers: 6,
      slots: 4,
      command: SLEEP_COMMAND,
    });
    await waitStarted(w, RUN, longIds(LONG));
    await w.waitFinalized(SHORT * 0.2);

    // The node leading the events stream and one other: no quorum is left.
    const jsm = await jetstreamManager(w.nc);
    const info = await jsm.streams.info(w.n.streams.events);
    expect(info.config.num_replicas).toBe(3);
    const leader = chaos.secure.cluster.servers.findIndex((s) => s.name === info.cluster?.leader);
    expect(leader, `leader ${info.cluster?.leader}`).toBeGreaterThanOrEqual(0);
    const victims = [leader, (leader + 1) % 3];
    const names = victims.map((i) => chaos.secure.cluster.servers[i]!.name);
    const fault: Fault = {
      what: `SIGKILL ${names.join(' and ')} of 3 nodes, down ${DOWN_MS / 1_000} s`,
      at: Date.now(),
    };
    await Promise.all(victims.map((i) => chaos.secure.cluster.killNode(i)));
    await new Promise((resolve) => setTimeout(resolve, fault.at + DOWN_MS - Date.now()));
    await Promise.all(victims.map((i) => chaos.secure.cluster.restartNode(i)));

    const status = await w.waitRunEnded(RUN, 300_000);
    expect(status.state).toBe('Succeeded');
    await saveProcessLogs(w);
    const report = await finishScenario(w, RUN, {
      faults: [fault],
      recovered: finalizingAgain(),
    });
    // With the quorum lost, a sink write can land while its answer is lost; the finalizer's
    // retry then writes the same final record again. The records themselves are checked
    // whole (one per task, from its final attempt); only the count of writes may exceed.
    expect(report.violations.filter((v) => !/^the sink took \d+ writes/.test(v))).toEqual([]);
    expect(report.stats.states).toEqual({ Succeeded: LONG + SHORT });
    expect(report.stats.workersLost).toBe(0);
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
    await waitReplicasCurrent(jsm, w);
  });
});
