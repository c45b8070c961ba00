import { startNatsServer } from '../helpers/nats-server.js';
import { killAll } from './processes.js';
import { ChaosWorld, chaosRun } from './world.js';
import { jetstreamManager } from '@nats-io/jetstream';

const server = await startNatsServer();
const w = await ChaosWorld.start({ urls: [server.url] });
try {
  await w.startBackend();
  await w.waitWorkersLive(Array.from({ length: 3 }, () => w.startWorker()));
  await w.client.submit(chaosRun('kill-server', 300));
  await w.waitFinalized(90);
  console.log('killing');
  await server.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 2000));
  await server.restart();
  console.log('restarted', server.url);
  for (let i = 0; i < 12; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    try {
      const jsm = await jetstreamManager(w.nc, { timeout: 2000 });
      const info = await jsm.getAccountInfo();
      console.log('acct ok', info.streams, await w.finalizedCount());
    } catch (e) { console.log('err', String(e)); }
  }
  console.log('STATUS', JSON.stringify(await w.status('kill-server')));
  const jsm = await jetstreamManager(w.nc);
  for (const s of ['EVENTS','DISPATCH','FINALIZE']) { const i = await jsm.streams.info(w.n.prefix.toUpperCase()+'_'+s); console.log(s, JSON.stringify(i.state)); }
  for await (const c of jsm.consumers.list(w.n.prefix.toUpperCase()+'_DISPATCH')) console.log('DC', JSON.stringify({d:c.delivered, a:c.ack_floor, p: c.num_pending, ap: c.num_ack_pending, w: c.num_waiting}));
  for await (const c of jsm.consumers.list(w.n.prefix.toUpperCase()+'_FINALIZE')) console.log('FC', JSON.stringify({d:c.delivered, a:c.ack_floor, p: c.num_pending, ap: c.num_ack_pending, w: c.num_waiting}));
  for await (const c of jsm.consumers.list(w.n.prefix.toUpperCase()+'_EVENTS')) console.log('EC', JSON.stringify({n: c.name, d:c.delivered, p: c.num_pending, w: c.num_waiting, push: c.config.deliver_subject}));

  console.log('BACKEND', w.backends[0]!.proc.stderr().slice(-3000));
  for (const x of w.workers) console.log('WORKER', x.stderr().split('\n').filter(l=>!l.includes('pulse failed')).join('\n').slice(-1500));
} finally {
  await w.stop(); await killAll(); await server.stop();
}
