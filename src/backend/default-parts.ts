import type { BackendParts } from './backend.js';
import { createOutputStore } from '../storage/create-output-store.js';
import { httpComponent } from '../http/http-component.js';
import { dashboardComponent } from '../http/dashboard/dashboard-component.js';
import { finalizerPool } from './finalize/index.js';
import { apiHandlers } from './api/index.js';
import { reconcilerLoop } from './reconciler/index.js';
import { snapshotter } from './snapshots/index.js';
import { sweeper } from './sweep/index.js';

/**
 * The parts a `sonar backend` runs. Each issue's component registers itself here:
 * worker/client API handlers, the reconciler loop, the finalizer pool.
 */
export const defaultParts: BackendParts = {
  handlers: apiHandlers,
  // httpComponent: /healthz, /readyz, /metrics and registered routes, when SONAR_HTTP_PORT is set.
  // snapshotter first: components stop in reverse order, so its stop-time snapshot comes
  // after the others have stopped appending.
  // dashboardComponent before httpComponent: open before the server mounts it, closed after.
  components: [
    snapshotter(),
    finalizerPool(),
    reconcilerLoop(),
    sweeper(),
    dashboardComponent(),
    httpComponent(),
  ],
  outputs: createOutputStore,
};
