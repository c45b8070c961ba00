import { isNoPlacementApiError } from '../../../streams/errors.js';
import type { Logger } from '../../log.js';

/** The first pause between tries, doubled each time up to {@link PLACEMENT_RETRY_MAX_MS}. */
export const PLACEMENT_RETRY_FIRST_MS = 500;
export const PLACEMENT_RETRY_MAX_MS = 5_000;

export interface PlacementWaitOptions {
  /** `SONAR_REPLICAS`, named in the warning. */
  replicas: number;
  log: Logger;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Runs `provision` until the cluster can place the streams' replicas. A cluster that is still
 * forming, or has a node down, answers "no suitable peers for placement"; the backend waits
 * for it, saying so on every try, as it waits for a server that is down, instead of exiting
 * into a restart loop. The same answer comes for a replica count above the cluster's size or
 * its servers' room, which no wait mends: the warning names the setting for the operator.
 * Any other error is thrown.
 */
export async function whenPlaceable<T>(
  provision: () => Promise<T>,
  opts: PlacementWaitOptions,
): Promise<T> {
  const sleep = opts.sleep ?? ((ms) => new Promise<void>((r) => setTimeout(r, ms)));
  let pauseMs = PLACEMENT_RETRY_FIRST_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await provision();
    } catch (err: unknown) {
      if (!isNoPlacementApiError(err)) throw err;
      opts.log.warn(
        'JetStream cannot place the streams yet (no suitable peers): fewer servers up, or with room, than SONAR_REPLICAS asks for; waiting',
        { replicas: opts.replicas, attempt, retryInMs: pauseMs, error: err.message },
      );
      await sleep(pauseMs);
      pauseMs = Math.min(pauseMs * 2, PLACEMENT_RETRY_MAX_MS);
    }
  }
}
