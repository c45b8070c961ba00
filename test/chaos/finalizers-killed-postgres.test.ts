import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { pgRecords } from '../helpers/postgres-writes.js';
import { finalizingAgain, finishClean } from './scenario.js';
import { killFinalizersInWaves } from './finalizer-kills.js';
import { chaosRun } from './world.js';
import { postgresWorldPerFile } from './postgres-world-per-file.js';

const TASKS = 600;

const chaos = postgresWorldPerFile();

describe('chaos: a burst of results into PostgreSQL while the finalizers are SIGKILLed', () => {
  it('leaves exactly one row per task, from its final attempt, each written once', async () => {
    // As finalizers-killed, with SONAR_RESULTS_URL: the finalizers upsert rows into
    // PostgreSQL, and are killed mid-write, connections open.
    const w = await chaos.running(chaosRun('burst', TASKS), { finalizers: 1, workers: 6 });

    const faults = await killFinalizersInWaves(w, TASKS);

    // The invariants read the table: one row per Succeeded task, stamped with its final
    // attempt, and as many row writes as rows.
    await finishClean(w, 'burst', 'finalizers-killed-postgres', {
      faults,
      recovered: finalizingAgain(),
      tasks: TASKS,
    });
    expect((await pgRecords(chaos.postgres().url, w.n.prefix)).size).toBe(TASKS);
    // The KV bucket took nothing: the configured sink is the only one written.
    const jsm = await jetstreamManager(w.nc);
    const kv = await jsm.streams.info(`KV_${w.n.buckets.results}`);
    expect(kv.state.messages).toBe(0);
  });
});
