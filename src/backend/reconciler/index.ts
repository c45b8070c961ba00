/** The reconciler component's entrance: what the rest of Sonar may use of it. */
export { tokenMatches } from './attempt-token.js';
export { DispatchConsumers } from './dispatch-consumers.js';
export { RECONCILER_LOCK } from './leader-lock.js';
export { Liveness } from './liveness.js';
export { reenqueueLostFinalizations } from './lost-finalizations.js';
export { planConfigOf } from './reconcile-pass.js';
export { reconcilerLoop } from './reconciler-loop.js';
export { Registry, workersInService } from './registry.js';
export type { LiveEntry } from './registry.js';
