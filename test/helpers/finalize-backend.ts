import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';
import type { Handlers } from '../../src/backend/api/index.js';
import { Backend } from '../../src/backend/backend.js';
import type { BackendContext } from '../../src/backend/context.js';
import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import type { FinalizerPoolOptions } from '../../src/backend/finalize/finalizer-pool.js';
import { silentLogger } from '../../src/log.js';
import type { OutputStore } from '../../src/storage/output-store.js';
import { ObjOutputStore, testConfig } from './finalize-fixtures.js';

export interface PoolBackend {
  backend: Backend;
  pool: FinalizerPool;
  stop(): Promise<void>;
}

/**
 * A real Backend (projection loop, writer, topology) whose only component is a finalizer pool,
 * on the given connection, serving `handlers` (none by default). `env` overrides config (e.g. SONAR_FINALIZERS).
 */
export async function startPoolBackend(
  nc: NatsConnection,
  url: string,
  n: Names,
  opts: FinalizerPoolOptions & {
    env?: Record<string, string>;
    outputStore?: OutputStore;
    /** The API it serves (none by default). */
    handlers?: (ctx: BackendContext) => Handlers;
  } = {},
): Promise<PoolBackend> {
  const { env, outputStore, handlers, ...poolOpts } = opts;
  let pool: FinalizerPool | undefined;
  const backend = await Backend.start({
    config: testConfig(url, n, env),
    nc,
    log: silentLogger,
    parts: {
      handlers: handlers ?? (() => ({})),
      components: [(ctx) => (pool = new FinalizerPool(ctx, poolOpts))],
      outputs: async (c) => outputStore ?? (await ObjOutputStore.open(c, n)),
    },
  });
  return { backend, pool: pool!, stop: () => backend.stop() };
}
