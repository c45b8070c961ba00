import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { names } from '../../streams/names.js';
import { SonarClient } from '../../src/client/client.js';
import { startNatsServer } from '../../src/dev/nats-server.js';
import { startBackend, startWorker } from '../../bench/e2e/procs.js';
import { lightLoad, runFile } from '../../bench/e2e/phases.js';
import { eventsSince, lastEventSeq, taskTimes } from '../../bench/e2e/measure.js';
const server = await startNatsServer();
const nc = await connect({ servers: server.url, noAsyncTraces: true });
const prof = process.env.PROF;
const b = await startBackend({ SONAR_NATS_URL: server.url, SONAR_PREFIX: 'bench', SONAR_ORPHAN_AGE: '5s', SONAR_PULSE_TTL: '5s', SONAR_PULSE_INTERVAL: '1s', SONAR_LOG_LEVEL: 'debug' }, prof);
const w = await startWorker(server.url, 'bench', 16, 'bench-w0');
const jsm = await jetstreamManager(nc);
const n = names('bench');
const client = new SonarClient(nc, { prefix: 'bench' });
const env = { nc, jsm, n, client };
for (let i = 0; i < 10; i++) {
  const from = await lastEventSeq(jsm, n);
  const t0 = Date.now();
  await client.submit(runFile(`seq${i}`, 1));
  const t1 = Date.now();
  let times = taskTimes(await eventsSince(nc, n, from));
  while (!times.finalized.size) { await new Promise(r => setTimeout(r, 20)); times = taskTimes(await eventsSince(nc, n, from)); }
  const rec = await eventsSince(nc, n, from);
  console.log(`submit ${t1 - t0} ms`, rec.map(r => `${r.type}@${Date.parse(r.time) - t0}`).join(' '));
}
console.log(await lightLoad(env, 'lat', Number(process.env.RATE ?? 50), 200));
await w.stop(); await b.stop();
console.log(b.lines.filter(l => !l.includes('"debug"')).slice(-15).join('\n'));
await nc.close(); await server.stop();
