import { afterAll, beforeAll, it } from 'vitest';
import { startNatsCluster } from '../helpers/nats-cluster.js';
import type { NatsCluster } from '../helpers/nats-cluster.js';
import { killAll } from './processes.js';
import { ChaosWorld } from './world.js';
let cluster: NatsCluster;
beforeAll(async () => { cluster = await startNatsCluster({ size: 3 }); });
afterAll(async () => { await killAll(); await cluster?.stop(); });
it('starts', async () => {
  const w = await ChaosWorld.start({ urls: cluster.urls, env: { SONAR_REPLICAS: '3' } });
  const t = Date.now();
  const p = Promise.all([w.startBackend(), w.startBackend()]);
  const timer = setInterval(() => {
    const b = w.backends; console.log('tick', Date.now() - t, b.length);
  }, 5000);
  await p.finally(() => clearInterval(timer));
  console.log('started in', Date.now() - t);
}, 90_000);
