import { afterAll, beforeAll, describe, it } from 'vitest';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { killAll } from '../helpers/sonar-process.js';
import type { ChaosWorld } from '../chaos/world.js';
import { serverOutage } from './server-outage.js';

let server: NatsServer;
let world: ChaosWorld | undefined;

beforeAll(async () => {
  server = await startNatsServer();
});
afterAll(async () => {
  await world?.stop();
  await killAll();
  await server?.stop();
});

describe('long chaos: the single nats-server SIGKILLed and down 30 s', () => {
  it('the run completes with nothing lost, nothing requeued and no process replaced', async () => {
    await serverOutage({
      name: 'server-down-30s',
      server,
      downMs: 30_000,
      onWorld: (w) => (world = w),
    });
  });
});
