import { connect } from '@nats-io/transport-node';
import { startNatsServer } from '../../src/dev/nats-server.js';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import { ProjectionLoop } from '../../src/backend/projection-loop.js';
import { silentLogger } from '../../src/log.js';
import { generateForBench } from './replay-scale.js';
import { jetstreamManager } from '@nats-io/jetstream';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
const server = await startNatsServer();
const nc = await connect({ servers: server.url, noAsyncTraces: true });
const n = names('bench1m');
await ensureTopology(await jetstreamManager(nc), n, DEFAULT_TOPOLOGY_OPTIONS);
await generateForBench(nc, n, Number(process.env.E ?? 300_000), 'big');
for (let i = 0; i < 2; i++) {
  const loop = new ProjectionLoop(new EventStore(nc, n), silentLogger);
  const t = performance.now();
  await loop.start();
  console.log('replay', loop.position, Math.round(performance.now() - t), 'ms', Math.round(loop.position / ((performance.now() - t) / 1000)), '/s');
  await loop.stop();
}
await nc.close(); await server.stop();
