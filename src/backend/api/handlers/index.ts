import { ErrorCode, SonarError } from '../../../../actors/errors.js';
import { isConcurrencyError } from '../../../../streams/errors.js';
import type { ApiCall, Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import { cancelHandlers } from './cancel-handler.js';
import { enrollmentHandlers } from './enrollment-handlers.js';
import { poisonedHandlers } from './poisoned-handlers.js';
import { progressLogHandlers } from './progress-log-handlers.js';
import { scheduleHandlers } from './schedule-handlers.js';
import { sweepHandlers } from './sweep-handler.js';
import { submitHandlers } from './submit-handlers.js';
import { workerHandlers } from './worker-handlers.js';

/**
 * A lost race that outlasted the writer's retries is `unavailable` on the wire, not
 * `conflict`: the request is idempotent and worth retrying, whereas `conflict` tells a worker
 * it was declared Lost or Left and must exit.
 */
function retryableRaces(handlers: Handlers): Handlers {
  const wrapped: Record<string, (req: never, call: ApiCall) => Promise<unknown>> = {};
  for (const [verb, handler] of Object.entries(handlers) as [
    string,
    (req: never, call: ApiCall) => Promise<unknown>,
  ][]) {
    wrapped[verb] = async (req, call) => {
      try {
        return await handler(req, call);
      } catch (err: unknown) {
        if (!isConcurrencyError(err)) throw err;
        throw new SonarError(ErrorCode.Unavailable, `${err.message}; try again`, err.details, {
          cause: err,
        });
      }
    };
  }
  return wrapped;
}

/** Every `sonar.api.*` verb of DESIGN.md section 6, served by one backend. */
export function apiHandlers(ctx: BackendContext): Handlers {
  return retryableRaces({
    ...workerHandlers(ctx),
    ...enrollmentHandlers(ctx),
    ...submitHandlers(ctx),
    ...cancelHandlers(ctx),
    ...poisonedHandlers(ctx),
    ...sweepHandlers(ctx),
    ...progressLogHandlers(ctx),
    ...scheduleHandlers(ctx),
  });
}
