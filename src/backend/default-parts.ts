import type { BackendParts } from './backend.js';
import { createOutputStore } from '../storage/create-output-store.js';
import { finalizerPool } from './finalizer-pool.js';
import { apiHandlers } from './handlers/index.js';
import { reconcilerLoop } from './reconciler-loop.js';

/**
 * The parts a `sonar backend` runs. Each issue's component registers itself here:
 * worker/client API handlers, the reconciler loop, the finalizer pool.
 */
export const defaultParts: BackendParts = {
  handlers: apiHandlers,
  components: [finalizerPool(), reconcilerLoop()],
  outputs: createOutputStore,
};
