import { readFile } from 'node:fs/promises';
import { connect, credsAuthenticator } from '@nats-io/transport-node';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../actors/errors.js';
import type { SonarConfig } from './config.js';
import { coalesceWrites } from './nats-coalesce.js';

export type ConnectSettings = Pick<
  SonarConfig,
  'natsUrl' | 'natsCreds' | 'natsUser' | 'natsPassword' | 'natsTlsCa'
>;

/**
 * Connects to NATS with the configured credentials. An unreachable server is a SonarError
 * with code `unavailable` and a one-line message naming the URL, never a stack trace.
 */
export async function connectNats(
  settings: ConnectSettings,
  extra: Partial<ConnectionOptions> = {},
): Promise<NatsConnection> {
  const opts: ConnectionOptions = {
    servers: settings.natsUrl.split(',').map((s) => s.trim()),
    timeout: 3_000,
    name: 'sonar',
    // nats.js builds an Error with a captured stack for every request, to give async stack
    // traces on failure: ~30% of the backend's CPU per publish on the submit path
    // (bench/submit.ts). Errors still carry their message and code.
    noAsyncTraces: true,
    ...extra,
  };
  if (settings.natsCreds) {
    opts.authenticator = credsAuthenticator(await readFile(settings.natsCreds));
  } else if (settings.natsUser) {
    opts.user = settings.natsUser;
    opts.pass = settings.natsPassword ?? '';
  }
  if (settings.natsTlsCa) opts.tls = { caFile: settings.natsTlsCa };
  try {
    const nc = await connect(opts);
    coalesceWrites(nc);
    return nc;
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw new SonarError(
      ErrorCode.Unavailable,
      `cannot reach NATS at ${settings.natsUrl}: ${why}`,
      { url: settings.natsUrl },
      { cause: err },
    );
  }
}
