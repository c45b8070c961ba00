import { isNoPlacementApiError } from '../../../streams/errors.js';
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
 * Runs `provision` until the cluster can place the streams' replicas. A cluster that is still
 * forming, or has a node down, answers "no suitable peers for placement"; the backend waits
 * for it, saying so on every try, as it waits for a server that is down, instead of exiting
 * into a restart loop. The same answer comes for a replica count above the cluster's size or
 * its servers' room, which no wait mends: the warning names the setting for the operator.
 * Any other error is thrown.
 */
export function whenPlaceable<T>(
  provision: () => Promise<T>,
  opts: PlacementWaitOptions,
): Promise<T> {
  return waitOut(provision, {
    isWait: isNoPlacementApiError,
    onWait: (err, attempt, retryInMs) =>
      opts.log.warn(
        'JetStream cannot place the streams yet (no suitable peers): fewer servers up, or with room, than SONAR_REPLICAS asks for; waiting',
        {
          replicas: opts.replicas,
          attempt,
          retryInMs,
          error: err instanceof Error ? err.message : String(err),
        },
      ),
    ...(opts.sleep && { sleep: opts.sleep }),
  });
}
