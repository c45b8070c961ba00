/** The sweep component's entrance: what the rest of Sonar may use of it. */
export { FullSweep, summaryOf } from './full-sweep.js';
export type { RepairProgress, SweepReport } from './full-sweep.js';
export { fenceOff } from './lost-workers.js';
export { sweeper } from './sweeper.js';
