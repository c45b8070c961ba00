import { afterAll, beforeAll, describe, it } from 'vitest';
import { startSecureNats } from '../helpers/secure-nats.js';
import type { SecureNats } from '../helpers/secure-nats.js';
import { killAll } from '../helpers/sonar-process.js';
import { freshPrefix } from '../helpers/topology.js';
import type { ChaosWorld } from '../chaos/world.js';
import { serverOutage } from './server-outage.js';

let secure: SecureNats;
let world: ChaosWorld | undefined;

beforeAll(async () => {
  // Secure mode, its credentials made for this file's one world.
  secure = await startSecureNats({ prefix: freshPrefix() });
});
afterAll(async () => {
  await world?.stop();
  await killAll();
  await secure?.stop();
});

describe('long chaos: the single nats-server SIGKILLed and down 120 s', () => {
  it('the run completes with nothing lost, nothing requeued and no process replaced', async () => {
    await serverOutage({
      name: 'server-down-120s',
      secure,
      downMs: 120_000,
      onWorld: (w) => (world = w),
    });
  });
});
