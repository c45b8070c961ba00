import { connect } from '@nats-io/transport-node';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../actors/errors.js';
import type { SonarConfig } from './config.js';
import { coalesceWrites, skipSettledRequestErrors } from '../streams/nats-internals.js';
import { readCreds } from './nats-creds.js';
import { natsTlsOptions, tlsFailure } from './nats-tls.js';
import type { NatsTlsSettings } from './nats-tls.js';
import type { Deadline } from './grace.js';

export type ConnectSettings = Pick<
  SonarConfig,
  'natsUrl' | 'natsCreds' | 'natsUser' | 'natsPassword' | 'natsTlsCa' | 'natsInboxPrefix'
> &
  NatsTlsSettings;

/**
 * How a connection lives through an outage.
 * - `long-lived` (backends, workers, supervisors, `sonar dev`, following CLI verbs):
 *   reconnects forever, a dial every 1-2 s (a fixed wait with random jitter, so a fleet
 *   does not dial in step). An outage is waited out, never turned into an exit: a closed
 *   connection then means the server refused us for good (an authorization error).
 * - `one-shot` (CLI verbs that ask once and print): no reconnect; a lost connection fails
 *   the verb at once with one line.
 */
export type ConnectionLife = 'long-lived' | 'one-shot';

/** The dial wait during an outage; each dial adds up to the same again as random jitter. */
export const RECONNECT_WAIT_MS = 1_000;

/**
 * How long one dial may take, from the socket to the server's first PONG. A refused port fails
 * at once whatever this is; it bounds a server that accepts but answers late, as a loaded host
 * does while many processes start together. A long-lived process would rather wait than exit
 * (the server answers in the end); a one-shot verb answers a person, so it gives up sooner.
 */
export const DIAL_TIMEOUT_MS: Record<ConnectionLife, number> = {
  'long-lived': 20_000,
  'one-shot': 3_000,
};

/** The nats.js options for each {@link ConnectionLife}. */
export function reconnectPolicy(life: ConnectionLife): Partial<ConnectionOptions> {
  return life === 'long-lived'
    ? {
        timeout: DIAL_TIMEOUT_MS[life],
        maxReconnectAttempts: -1,
        reconnectTimeWait: RECONNECT_WAIT_MS,
        reconnectJitter: RECONNECT_WAIT_MS,
        reconnectJitterTLS: RECONNECT_WAIT_MS,
      }
    : { timeout: DIAL_TIMEOUT_MS[life], reconnect: false };
}

/**
 * Connects to NATS with the configured credentials. An unreachable server is a SonarError
 * with code `unavailable` and a one-line message naming the URL, never a stack trace.
 * Long-lived unless `extra` says otherwise (see {@link ConnectionLife}).
 */
export async function connectNats(
  settings: ConnectSettings,
  extra: Partial<ConnectionOptions> & { life?: ConnectionLife } = {},
): Promise<NatsConnection> {
  const { life = 'long-lived', ...rest } = extra;
  const opts: ConnectionOptions = {
    servers: settings.natsUrl.split(',').map((s) => s.trim()),
    name: 'sonar',
    // nats.js builds an Error with a captured stack for every request, to give async stack
    // traces on failure: a large share of the backend's CPU per publish on the submit path
    // (bench/submit.ts). Errors still carry their message and code.
    noAsyncTraces: true,
    ...reconnectPolicy(life),
    ...rest,
  };
  // A caller's own credential (a worker's minted JWT) replaces the configured one.
  if (!rest.authenticator && settings.natsCreds) {
    const creds = await readCreds(settings.natsCreds);
    opts.authenticator = creds.authenticator;
    if (creds.inboxPrefix !== undefined) opts.inboxPrefix = creds.inboxPrefix;
  } else if (!rest.authenticator && settings.natsUser) {
    opts.user = settings.natsUser;
    opts.pass = settings.natsPassword ?? '';
  }
  // Explicit settings win over what the creds file implies.
  if (settings.natsInboxPrefix) opts.inboxPrefix = settings.natsInboxPrefix;
  if (rest.inboxPrefix) opts.inboxPrefix = rest.inboxPrefix;
  const tls = await natsTlsOptions(settings);
  if (tls !== undefined) opts.tls = tls;
  skipSettledRequestErrors();
  try {
    const nc = await connect(opts);
    coalesceWrites(nc);
    return nc;
  } catch (err: unknown) {
    const why = tlsFailure(err) ?? (err instanceof Error ? err.message : String(err));
    throw new SonarError(
      ErrorCode.Unavailable,
      `cannot reach NATS at ${settings.natsUrl}: ${why}`,
      { url: settings.natsUrl },
      { cause: err },
    );
  }
}

/**
 * Drains `nc` (within `grace`, when given), then closes it if the drain did not: a drain
 * that ran out of time, or failed because the connection was dialling (its flushes are
 * rejected within a redial or two, when the server refuses a revoked credential), leaves
 * the connection reconnecting forever, and the process alive with nothing to do. A drain
 * already under way (a second stop) is waited for, not cut short.
 */
export async function drainAndClose(nc: NatsConnection, grace?: Deadline): Promise<void> {
  const drained = nc.isDraining() ? nc.closed() : nc.drain();
  if (grace) await grace.settle(drained);
  else await drained.catch(() => {});
  if (!nc.isClosed()) await nc.close().catch(() => {});
}
