import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../context.js';
import { cancelHandlers } from './cancel-handler.js';
import { submitHandlers } from './submit-handlers.js';
import { workerHandlers } from './worker-handlers.js';

/** Every `sonar.api.*` verb of DESIGN.md section 6, served by one backend. */
export function apiHandlers(ctx: BackendContext): Handlers {
  return { ...workerHandlers(ctx), ...submitHandlers(ctx), ...cancelHandlers(ctx) };
}
