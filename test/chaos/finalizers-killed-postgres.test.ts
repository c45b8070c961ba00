import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { postgresPerFile } from '../helpers/postgres.js';
import { pgRecords } from '../helpers/postgres-writes.js';
import { finalizingAgain, finishScenario } from './scenario.js';
import type { Fault } from './scenario.js';
import { chaosRun } from './world.js';
import { worldOnServer } from './world-per-file.js';

const TASKS = 600;

const chaos = worldOnServer();
const postgres = postgresPerFile();

describe('chaos: a burst of results into PostgreSQL while the finalizers are SIGKILLed', () => {
  it('leaves exactly one row per task, from its final attempt, each written once', async () => {
    // As finalizers-killed, with SONAR_RESULTS_URL: the finalizers upsert rows into
    // PostgreSQL, and are killed mid-write, connections open.
    const url = postgres().url;
    const w = await chaos.world({ env: { SONAR_FINALIZERS: '1', SONAR_RESULTS_URL: url } });
    await w.countResultWrites();
    await w.startBackends(2);
    await w.startSupervisedWorkers(6, { slots: 4 });
    await w.submit(chaosRun('burst', TASKS));

    const jsm = await jetstreamManager(w.nc);
    const backlog = async (): Promise<number> =>
      (await jsm.streams.info(w.n.streams.finalize)).state.messages;
    const faults: Fault[] = [];
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
    // The invariants read the table: one row per Succeeded task, stamped with its final
    // attempt, and as many row writes as rows.
    const report = await finishScenario(w, 'finalizers-killed-postgres', {
      faults,
      recovered: finalizingAgain(),
    });
    expect(report.violations).toEqual([]);
    expect(report.stats.states).toEqual({ Succeeded: TASKS });
    expect((await pgRecords(url, w.n.prefix)).size).toBe(TASKS);
    // The KV bucket took nothing: the configured sink is the only one written.
    const kv = await jsm.streams.info(`KV_${w.n.buckets.results}`);
    expect(kv.state.messages).toBe(0);
  });
});
