import { ErrorCode, SonarError } from '../../actors/errors.js';
import { ApiClient, isApiError } from '../worker/api-client.js';
import { withConnection } from './context.js';
import type { ConnectionFlags } from './context.js';

/**
 * Runs an operator verb that a backend serves (`sweep`, `poisoned ...`): the CLI asks, and
 * never writes to the streams itself. A backend older than the verb answers `not_found`
 * ("unknown api verb"): said in one line naming the fix.
 */
export async function operatorRequest<T>(
  flags: ConnectionFlags,
  ask: (api: ApiClient) => Promise<T>,
): Promise<T> {
  return withConnection(flags, async ({ nc, names }) => {
    try {
      return await ask(new ApiClient(nc, names));
    } catch (err: unknown) {
      if (isApiError(err, ErrorCode.NotFound) && /unknown api verb/.test(err.message)) {
        throw new SonarError(
          ErrorCode.NotFound,
          `${err.message}: the backends are older than this CLI; upgrade them first (a backend runs this verb)`,
          err.details,
          { cause: err },
        );
      }
      throw err;
    }
  });
}
