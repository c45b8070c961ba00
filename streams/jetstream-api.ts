/**
 * Which JetStream API a connection speaks: `$JS.API` in the account that holds the streams,
 * or the readers' API prefix (`<prefix>.rjs.API`) for a client or operator in the readers'
 * account (secure mode, docs/threat-model.md). Found once per connection by asking
 * `$JS.API.INFO`: the readers' account has no JetStream of its own and says so. Every reader
 * of a stream, bucket or object store takes its JetStream context from here. Only readers and
 * backends do: a worker in the workers' account (which has no JetStream either) takes the
 * prefix its enrollment names instead.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager, JetStreamOptions } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../actors/errors.js';
import type { Names } from './names.js';

/** JetStream's "not enabled for account" error code. */
const JS_NOT_ENABLED_FOR_ACCOUNT = 10039;

const PROBE_TIMEOUT_MS = 5_000;

const found = new WeakMap<NatsConnection, Promise<JetStreamOptions>>();

async function probe(nc: NatsConnection, n: Names): Promise<JetStreamOptions> {
  try {
    const answer = await nc.request('$JS.API.INFO', undefined, { timeout: PROBE_TIMEOUT_MS });
    const body = answer.json<{ error?: { err_code?: number } }>();
    if (body.error?.err_code === JS_NOT_ENABLED_FOR_ACCOUNT) {
      return { apiPrefix: n.subjects.readerJsApi };
    }
  } catch (err) {
    // A server without JetStream has no responder: the default then fails with its own error.
    if (err instanceof Error && /no responders/i.test(err.message)) return {};
    throw new SonarError(
      ErrorCode.Unavailable,
      `$JS.API.INFO (finding this connection's JetStream API) not answered: ${err instanceof Error ? err.message : String(err)}`,
      {},
      { cause: err },
    );
  }
  return {};
}

/** The JetStream options of `nc`: its API prefix, found once and remembered. */
export function jetstreamOptions(nc: NatsConnection, n: Names): Promise<JetStreamOptions> {
  let options = found.get(nc);
  if (options === undefined) {
    options = probe(nc, n);
    found.set(nc, options);
    // a failed probe (a timeout) is asked again next time
    options.catch(() => found.delete(nc));
  }
  return options;
}

/** A JetStream client of `nc` on the API its account speaks. */
export async function jetstreamOf(nc: NatsConnection, n: Names): Promise<JetStreamClient> {
  return jetstream(nc, await jetstreamOptions(nc, n));
}

/** A JetStream manager of `nc` on the API its account speaks. */
export async function jetstreamManagerOf(nc: NatsConnection, n: Names): Promise<JetStreamManager> {
  return jetstreamManager(nc, await jetstreamOptions(nc, n));
}
