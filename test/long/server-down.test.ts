import { describe, it } from 'vitest';
import { worldOnServer } from '../chaos/world-per-file.js';
import { serverOutage } from './server-outage.js';

// Each outage on a server of its own: its credentials are made for one world.
describe.each([{ downS: 30 }, { downS: 120 }])(
  'long chaos: the single nats-server SIGKILLed and down $downS s',
  ({ downS }) => {
    const chaos = worldOnServer();
    it('the run completes with nothing lost, no process replaced, and only a dispatch the kill cut requeued', () =>
      serverOutage({ name: `server-down-${downS}s`, chaos, downMs: downS * 1_000 }));
  },
);
