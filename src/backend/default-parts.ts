import type { BackendParts } from './backend.js';

/**
 * The parts a `sonar backend` runs. Each issue's component registers itself here:
 * worker/client API handlers, the reconciler loop, the finalizer pool.
 */
export const defaultParts: BackendParts = {
  handlers: () => ({}),
  components: [],
  outputs: () => Promise.reject(new Error('no output store is wired yet')),
};
