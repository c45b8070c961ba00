import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { postgresPerFile } from '../helpers/postgres.js';
import { pgRecords } from '../helpers/postgres-writes.js';
import { finalizingAgain, finishScenario } from './scenario.js';
import { killFinalizersInWaves } from './finalizer-kills.js';
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

    const faults = await killFinalizersInWaves(w, TASKS);

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
    const jsm = await jetstreamManager(w.nc);
    const kv = await jsm.streams.info(`KV_${w.n.buckets.results}`);
    expect(kv.state.messages).toBe(0);
  });
});
