import { connect } from '@nats-io/transport-node';
import { SonarClient } from '../../src/client/client.js';
import { startNatsServer } from '../../src/dev/nats-server.js';
import { runFile } from './phases.js';
import { memoryOf, startBackend } from './procs.js';
const server = await startNatsServer();
const nc = await connect({ servers: server.url, noAsyncTraces: true });
const b = await startBackend({ SONAR_NATS_URL: server.url, SONAR_PREFIX: 'bench' });
const client = new SonarClient(nc, { prefix: 'bench' });
console.log('up', memoryOf(b.pid));
for (let i = 0; i < 5; i++) { await client.submit(runFile(`idle${i}`, 20_000, {}, 'nobody')); console.log((i+1)*20, 'k', memoryOf(b.pid)); }
await new Promise((r) => setTimeout(r, 8000));
console.log('settled', memoryOf(b.pid));
await b.stop(); await nc.close(); await server.stop();
