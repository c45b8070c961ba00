import type { BackendParts } from './backend/backend.js';
import { createOutputStore } from './storage/create-output-store.js';
import { httpComponent } from './http/http-component.js';
import { dashboardComponent } from './http/dashboard/dashboard-component.js';
import { finalizerPool } from './backend/finalize/index.js';
import { apiHandlers } from './backend/api/index.js';
import { reconcilerLoop } from './backend/reconciler/index.js';
import { scheduleFirer } from './backend/schedules/index.js';
import { snapshotter } from './backend/snapshots/index.js';
import { sweeper } from './backend/sweep/index.js';

/**
 * The parts a `sonar backend` process runs: the backend's components and its HTTP face
 * (probes, metrics, dashboard). Wired here, above both, so the backend never knows it has
 * an HTTP face.
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
    scheduleFirer(),
    sweeper(),
    dashboardComponent(),
    httpComponent(),
  ],
  outputs: createOutputStore,
};
