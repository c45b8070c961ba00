import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';
import type { Handlers } from '../../src/backend/api/index.js';
import type { BackendContext } from '../../src/backend/context.js';
import { finalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import type { FinalizerPoolOptions } from '../../src/backend/finalize/finalizer-pool.js';
import type { OutputStore } from '../../src/storage/output-store.js';
import { FINALIZE_TEST_ENV, objOutputs } from './finalize-fixtures.js';
import { startBackend } from './test-backend.js';
import type { TestBackend } from './test-backend.js';

/** What a pool backend is started with: the pool's own options and the backend's parts. */
export type PoolBackendOptions = FinalizerPoolOptions & {
  env?: Record<string, string>;
  outputStore?: OutputStore;
  handlers?: (ctx: BackendContext) => Handlers;
};

/**
 * A backend on `n`'s prefix whose only component is a finalizer pool (reach it with
 * `component(FinalizerPool)`), serving `handlers` (none by default), its outputs in the test
 * object store unless `outputStore` is given. `env` overrides config (e.g. SONAR_FINALIZERS).
 */
export const startPoolBackend = (
  nc: NatsConnection,
  url: string,
  n: Names,
  { env, outputStore, handlers, ...pool }: PoolBackendOptions = {},
): Promise<TestBackend> =>
  startBackend({
    url,
    nc,
    prefix: n.prefix,
    env: { ...FINALIZE_TEST_ENV, ...env },
    components: [finalizerPool(pool)],
    handlers: handlers ?? 'none',
    outputs: outputStore ?? objOutputs,
  });
