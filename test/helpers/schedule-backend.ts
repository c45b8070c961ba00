/**
 * The backend of a schedules test file: the reconciler and a schedule firer checking every
 * 100 ms, fast ticks, waited for until it leads (only the leader fires), and an API client.
 */
import { reconcilerLoop } from '../../src/backend/reconciler/index.js';
import { scheduleFirer } from '../../src/backend/schedules/index.js';
import type { Logger } from '../../src/log.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { eventually } from './eventually.js';
import type { ServerPerFile } from './server-per-file.js';
import { startBackend } from './test-backend.js';
import type { TestBackend } from './test-backend.js';

export async function startScheduleBackend(
  nats: ServerPerFile,
  log: Logger,
  env: Record<string, string> = {},
): Promise<{ tb: TestBackend; api: ApiClient }> {
  const tb = await startBackend({
    url: nats.server.url,
    nc: nats.nc,
    env: { SONAR_TICK: '200ms', SONAR_LOCK_TTL: '2s', ...env },
    components: [reconcilerLoop(), scheduleFirer({ checkMs: 100 })],
    log,
  });
  await eventually(() => tb.ctx.loop.projection.leader?.nodeId === tb.ctx.nodeId, {
    message: 'the backend leads',
  });
  return { tb, api: new ApiClient(nats.nc, tb.ctx.names) };
}
