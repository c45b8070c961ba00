import { connect } from '@nats-io/transport-node';
import { startNatsServer } from '../../src/dev/nats-server.js';
import { replayAtScale } from './replay-scale.js';
const server = await startNatsServer();
const nc = await connect({ servers: server.url, noAsyncTraces: true });
const t = performance.now();
console.log(await replayAtScale(nc, server.url, Number(process.env.E ?? 1_000_000), process.env.PROF));
console.log('total', Math.round(performance.now() - t));
await nc.close(); await server.stop();
