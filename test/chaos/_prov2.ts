import { startNatsCluster } from '../helpers/nats-cluster.js';
import { spawnSonar, killAll } from './processes.js';
import { freshPrefix } from '../helpers/topology.js';
import { CHAOS_ENV } from './world.js';
const cluster = await startNatsCluster({ size: 3 });
for (let round = 0; round < 4; round++) {
  const env = { ...CHAOS_ENV, SONAR_NATS_URL: cluster.urls.join(','), SONAR_PREFIX: freshPrefix(), SONAR_REPLICAS: '3', SONAR_DEBUG: '1' };
  const ps = [spawnSonar('a', ['backend'], env), spawnSonar('b', ['backend'], env)];
  const t = Date.now();
  while (Date.now() - t < 30000) {
    await new Promise(r => setTimeout(r, 500));
    if (ps.every(p => p.stderr().includes('backend started') || !p.running)) break;
  }
  for (const p of ps) console.log(round, p.name, p.running ? 'running' : 'exited', Date.now() - t, p.stderr().split('\n').filter(l => !l.includes('"info"')).join('\n').slice(0, 1500), p.stderr().includes('backend started'));
  await killAll();
}
await cluster.stop();
