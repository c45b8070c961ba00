import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { clusterPerFile } from '../helpers/cluster-per-file.js';
import { killAll, spawnSonar } from '../helpers/sonar-process.js';
import { freshPrefix } from '../helpers/topology.js';
import { NO_IMDS } from '../helpers/worker-fixtures.js';

// The test stops a node of this cluster and starts it again; the fixture stops it for good.
const fixture = clusterPerFile(3);
const cluster = () => fixture.servers;

afterAll(async () => {
  await killAll();
});

describe('a backend started while the cluster cannot place its replicas', () => {
  it('waits, saying so, and starts once the missing node is back', async () => {
    await cluster().stopNode(2);
    const p = spawnSonar('placement', ['backend'], {
      SONAR_NATS_URL: cluster().urls.slice(0, 2).join(','),
      SONAR_PREFIX: freshPrefix(),
      SONAR_REPLICAS: '3',
      SONAR_IMDS_URL: NO_IMDS,
    });
    // Two of three servers up: a meta leader, but no third peer for an R3 stream.
    await eventually(() => (p.stderr().match(/cannot place the streams yet/g) ?? []).length >= 2, {
      timeoutMs: 30_000,
      message: 'two placement warnings',
    });
    expect(p.running, p.stderr()).toBe(true);
    expect(p.stderr()).toMatch(/"replicas":3/);
    expect(p.stderr()).not.toMatch(/backend started/);

    await cluster().restartNode(2);
    await eventually(() => p.stderr().includes('backend started') || !p.running, {
      timeoutMs: 45_000,
      message: 'backend started',
    });
    expect(p.running, p.stderr()).toBe(true);
    await p.kill('SIGTERM');
    expect((await p.exited).code, p.stderr()).toBe(0);
  });
});
