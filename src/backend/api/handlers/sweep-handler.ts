import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import { FullSweep } from '../../sweep/index.js';

/** How often a sweep under way says so to the operator who asked for it. */
export const SWEEP_PROGRESS_EVERY_MS = 1_000;

/**
 * `sweep`: one full sweep now, on the backend that takes the request, without claiming the
 * fleet's turn (`sonar sweep`). It runs for longer than a request's timeout, so the backend
 * sends `{"progress":{"repair","done","of","elapsedMs"}}` as each repair begins and every
 * second, then the report. A sweep is safe beside the reconciler, the finalizers and another
 * sweep, so a caller who lost the answer may ask again.
 */
export function sweepHandlers(ctx: BackendContext): Handlers {
  return {
    sweep: async (_req, call) => {
      const started = performance.now();
      let now: { repair: string; done: number; of: number } = { repair: 'open', done: 0, of: 0 };
      const tell = () =>
        call.progress({ ...now, elapsedMs: Math.round(performance.now() - started) });
      tell();
      const timer = setInterval(tell, SWEEP_PROGRESS_EVERY_MS);
      try {
        const sweep = await FullSweep.open(ctx);
        return await sweep.run(undefined, (repair, done, of) => {
          now = { repair, done, of };
          tell();
        });
      } finally {
        clearInterval(timer);
      }
    },
  };
}
