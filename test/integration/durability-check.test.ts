import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import {
  judgeDurability,
  readDurabilityFacts,
} from '../../src/backend/storage/durability-check.js';
import { eventually } from '../helpers/eventually.js';
import { clusterPerFile } from '../helpers/cluster-per-file.js';
import { freshTopology } from '../helpers/topology.js';
import { NO_IMDS, spawnWorker } from '../helpers/worker-fixtures.js';
import { killAll, spawnSonar } from '../helpers/sonar-process.js';
import { freshPrefix } from '../helpers/topology.js';

const nats = clusterPerFile(3);
// Registered after the cluster's: the processes are killed before the cluster stops.
afterAll(killAll);

const backendEnv = (replicas: number) => ({
  SONAR_NATS_URL: nats.servers.urls.join(','),
  SONAR_PREFIX: freshPrefix(),
  SONAR_REPLICAS: String(replicas),
  SONAR_IMDS_URL: NO_IMDS,
});

describe('durability check on a 3-node cluster', () => {
  it('reads every Sonar stream, bucket and store with its replica count', async () => {
    const n = await freshTopology(nats.nc, { replicas: 1 });
    const facts = await readDurabilityFacts(nats.nc, await jetstreamManager(nats.nc), n);
    expect(facts.cluster).toBe('sonar_test');
    expect(facts.serverVersion).toMatch(/^2\./);
    expect(facts.streams.map((s) => s.name)).toContain(n.streams.events);
    expect(facts.streams.map((s) => s.name)).toContain(`KV_${n.buckets.workers}`);
    expect(facts.streams.map((s) => s.name)).toContain(`OBJ_${n.objectStores.outputs}`);
    // Every stream, bucket and object store the names define.
    const all =
      Object.keys(n.streams).length +
      Object.keys(n.buckets).length +
      Object.keys(n.objectStores).length;
    expect(facts.streams).toHaveLength(all);
    expect(facts.streams.every((s) => s.replicas === 1)).toBe(true);
    expect(judgeDurability(facts, false).warnings[0]).toMatch(
      new RegExp(`${all} stream\\(s\\) keep fewer`),
    );
  });

  it('`sonar backend --strict-durability` refuses replicas 1, and exits', async () => {
    const p = spawnSonar('strict', ['backend', '--strict-durability'], backendEnv(1));
    const exit = await p.exited;
    expect(exit.code, p.stderr()).toBe(1);
    expect(p.stderr()).toMatch(/sonar: refusing to start \(--strict-durability\): on cluster/);
    expect(p.stderr()).not.toMatch(/backend started/);
  });

  it('SONAR_STRICT_DURABILITY=1 with SONAR_REPLICAS=3 starts, noting the 2.9 fsync', async () => {
    const p = spawnSonar('strict-ok', ['backend'], {
      ...backendEnv(3),
      SONAR_STRICT_DURABILITY: '1',
    });
    await eventually(() => p.stderr().includes('backend started') || !p.running, {
      timeoutMs: 45_000,
    });
    expect(p.running, p.stderr()).toBe(true);
    expect(p.stderr()).toMatch(/has no sync_interval setting/);
    expect(p.stderr()).not.toMatch(/keep fewer than 3 replicas/);
    await p.kill('SIGTERM');
  });

  it('without strict, replicas 1 on a cluster is a warning and the backend runs', async () => {
    const env = backendEnv(1);
    const p = spawnSonar('lenient', ['backend'], env);
    await eventually(() => p.stderr().includes('backend started') || !p.running, {
      timeoutMs: 45_000,
    });
    expect(p.running, p.stderr()).toBe(true);
    const warning = p
      .stderr()
      .split('\n')
      .find((l) => l.includes('keep fewer than 3 replicas'));
    expect(JSON.parse(warning!)).toMatchObject({ level: 'warn', component: 'durability' });
    // And it serves: a worker joins through it.
    const w = spawnWorker(env, ['--worker-id', 'd1', '--tags', 'x']);
    await eventually(() => w.stderr().includes('worker joined'), { timeoutMs: 30_000 });
    w.child.kill('SIGKILL');
    await p.kill('SIGTERM');
  });
});
