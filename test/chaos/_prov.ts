import { startNatsCluster } from '../helpers/nats-cluster.js';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { ensureTopology } from '../../streams/provision.js';
import { names } from '../../streams/names.js';
import { freshPrefix } from '../helpers/topology.js';
const cluster = await startNatsCluster({ size: 3 });
for (let round = 0; round < 4; round++) {
  const n = names(freshPrefix());
  const go = async (who: string) => {
    const nc = await connect({ servers: cluster.urls });
    const jsm = await jetstreamManager(nc);
    const t = Date.now();
    const timer = setInterval(() => console.log(who, 'still provisioning', Date.now() - t), 10000);
    try {
      const c = await ensureTopology(jsm, n, { replicas: 3, pulseTtlMs: 1500, lockTtlMs: 1000, finalizeLeaseMs: 2000, finalizeMaxDeliver: 6 });
      console.log(who, 'done', Date.now() - t, c.filter(x => x.action !== 'unchanged').length);
    } catch (e) { console.log(who, 'error', Date.now() - t, String(e)); }
    finally { clearInterval(timer); await nc.close(); }
  };
  await Promise.all([go('a' + round), go('b' + round)]);
}
await cluster.stop();
