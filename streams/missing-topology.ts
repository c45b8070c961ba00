import { jetstreamManagerOf } from './jetstream-api.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../actors/errors.js';
import { isStreamNotFoundApiError } from './errors.js';
import type { Names } from './names.js';

const looksLikeStreamNotFound = (err: unknown): boolean =>
  isStreamNotFoundApiError(err) || (err instanceof Error && err.message === 'stream not found');

/**
 * The error to show for `err`: a "stream not found" that comes from a server on which no
 * backend has provisioned this prefix becomes one line saying what to start (or which prefix
 * to check); anything else is `err` itself.
 */
export async function explainMissingStreams(
  nc: NatsConnection,
  n: Names,
  err: unknown,
): Promise<unknown> {
  if (!looksLikeStreamNotFound(err)) return err;
  try {
    await (await jetstreamManagerOf(nc, n)).streams.info(n.streams.events);
    return err;
  } catch (infoErr: unknown) {
    // Another failure (the connection gone, say) tells nothing about the streams.
    if (!looksLikeStreamNotFound(infoErr)) return err;
  }
  return new SonarError(
    ErrorCode.NotFound,
    `no Sonar streams under prefix "${n.prefix}" on this server: start a backend on it first (\`sonar backend\`; \`sonar dev\` runs one locally), or set SONAR_PREFIX (--prefix) to the prefix the backends use`,
    { prefix: n.prefix, stream: n.streams.events },
    { cause: err },
  );
}
