import v8 from 'node:v8';
import { connect } from '@nats-io/transport-node';
import { Backend } from '../../src/backend/backend.js';
import { defaultParts } from '../../src/backend/default-parts.js';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { SonarClient } from '../../src/client/client.js';
import { startNatsServer } from '../../src/dev/nats-server.js';
import { runFile } from './phases.js';
const mb = (x: number) => Math.round(x / 2 ** 20);
const show = (label: string) => {
  (globalThis as any).gc?.(); (globalThis as any).gc?.();
  const m = process.memoryUsage();
  const spaces = v8.getHeapSpaceStatistics().map((s) => `${s.space_name.replace('_space','')}=${mb(s.space_size)}/${mb(s.space_used_size)}`).join(' ');
  console.log(label, `rss ${mb(m.rss)} heapTotal ${mb(m.heapTotal)} heapUsed ${mb(m.heapUsed)} ext ${mb(m.external)} ab ${mb(m.arrayBuffers)}`, spaces);
};
show('start');
const server = await startNatsServer();
const nc = await connect({ servers: server.url, noAsyncTraces: true });
const config = loadConfig({ SONAR_NATS_URL: server.url, SONAR_PREFIX: 'bench' });
const b = await Backend.start({ config, log: silentLogger, parts: defaultParts });
show('backend up');
const nc2 = await connect({ servers: server.url, noAsyncTraces: true });
const client = new SonarClient(nc2, { prefix: 'bench' });
for (let i = 0; i < 5; i++) { await client.submit(runFile(`idle${i}`, 20_000, {}, 'nobody')); show(`after ${(i + 1) * 20}k`); }
await new Promise((r) => setTimeout(r, 3000));
show('settled');
await b.stop(); await nc2.close(); await nc.close(); await server.stop();
