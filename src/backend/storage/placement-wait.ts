import { isNoPlacementApiError, isStreamNotFoundApiError } from '../../../streams/errors.js';
import type { Logger } from '../../log.js';
import { waitOut } from '../../wait-out.js';
import type { WaitOutOptions } from '../../wait-out.js';

export interface PlacementWaitOptions {
  /** `SONAR_REPLICAS`, named in the warning. */
  replicas: number;
  log: Logger;
  sleep?: WaitOutOptions['sleep'];
}

/**
 * Runs `provision` (idempotent) until the cluster has placed and applied the streams.
 *
 * - "no suitable peers for placement": a cluster that is still forming, or has a node down,
 *   cannot place the replicas. The backend waits for it, saying so on every try, as it waits
 *   for a server that is down, instead of exiting into a restart loop. The same answer comes
 *   for a replica count above the cluster's size or its servers' room, which no wait mends:
 *   the warning names the setting for the operator.
 * - "stream not found" for a stream `provision` itself just created: on a cluster the stream's
 *   leader can answer the create before every server's meta layer has applied it, and a
 *   consumer create or stream info asked of that server in the meantime finds no stream
 *   (nats-server fixed this in 2026; 2.9 has it). The next try finds it.
 *
 * Any other error is thrown.
 */
export function whenPlaceable<T>(
  provision: () => Promise<T>,
  opts: PlacementWaitOptions,
): Promise<T> {
  return waitOut(provision, {
    isWait: (err) => isNoPlacementApiError(err) || isStreamNotFoundApiError(err),
    onWait: (err, attempt, retryInMs) => {
      const error = err instanceof Error ? err.message : String(err);
      if (isStreamNotFoundApiError(err)) {
        opts.log.info('a stream just created is not yet known to every server; retrying', {
          attempt,
          retryInMs,
          error,
        });
        return;
      }
      opts.log.warn(
        'JetStream cannot place the streams yet (no suitable peers): fewer servers up, or with room, than SONAR_REPLICAS asks for; waiting',
        { replicas: opts.replicas, attempt, retryInMs, error },
      );
    },
    ...(opts.sleep && { sleep: opts.sleep }),
  });
}
