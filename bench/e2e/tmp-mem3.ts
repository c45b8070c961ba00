import { connect } from '@nats-io/transport-node';
import { SonarClient } from '../../src/client/client.js';
import { startNatsServer } from '../../src/dev/nats-server.js';
import { runFile } from './phases.js';
import { memoryOf, startBackend } from './procs.js';
const server = await startNatsServer();
const nc = await connect({ servers: server.url, noAsyncTraces: true });
const b = await startBackend({ SONAR_NATS_URL: server.url, SONAR_PREFIX: 'bench', NODE_OPTIONS: '--require /tmp/e2e/memlog.cjs' });
const client = new SonarClient(nc, { prefix: 'bench' });
const last = () => b.lines.filter((l) => l.includes('"mem","main":true')).slice(-1)[0];
console.log('up', memoryOf(b.pid), last());
for (let i = 0; i < 5; i++) { await client.submit(runFile(`idle${i}`, 20_000, {}, 'nobody')); await new Promise((r) => setTimeout(r, 1100)); console.log((i+1)*20, 'k', memoryOf(b.pid).rssMb|0, last()); }
await new Promise((r) => setTimeout(r, 8000));
console.log('settled', memoryOf(b.pid), last());
await b.stop(); await nc.close(); await server.stop();
