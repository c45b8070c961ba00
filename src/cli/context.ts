import type { NatsConnection } from '@nats-io/transport-node';
import { explainMissingStreams } from '../../streams/missing-topology.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { loadProcessConfig } from '../config.js';
import type { SonarConfig } from '../config.js';
import { connectNats } from '../nats.js';
import type { ConnectionLife } from '../nats.js';

/** Options every networked verb takes. */
export interface ConnectionFlags {
  server?: string;
  prefix?: string;
}

export interface CliContext {
  config: SonarConfig;
  names: Names;
  nc: NatsConnection;
}

/**
 * Loads the config (env, then flags), connects, runs `fn`, and always closes. A verb that
 * asks once and prints is `one-shot` (a lost connection fails it at once, with one line);
 * one that follows the stream (`tail`, `submit --wait`) is `long-lived` and waits out an
 * outage.
 */
export async function withConnection<T>(
  flags: ConnectionFlags,
  fn: (ctx: CliContext) => Promise<T>,
  life: ConnectionLife = 'one-shot',
): Promise<T> {
  const config = loadProcessConfig({
    ...(flags.server ? { SONAR_NATS_URL: flags.server } : {}),
    ...(flags.prefix ? { SONAR_PREFIX: flags.prefix } : {}),
  });
  const nc = await connectNats(config, { life });
  const n = names(config.prefix);
  try {
    return await fn({ config, names: n, nc });
  } catch (err: unknown) {
    throw await explainMissingStreams(nc, n, err);
  } finally {
    await nc.close().catch(() => {});
  }
}
