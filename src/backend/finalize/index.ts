/** The finalize component's entrance: what the rest of Sonar may use of it. */
export { FailureLog } from './failure-log.js';
export type { FinalizeFailure } from './failure-log.js';
export { parseJobs } from './finalize-job.js';
export type { QueuedJob } from './finalize-job.js';
export { finalizerPool } from './finalizer-pool.js';
export { poisonHeldJob } from './max-deliveries-watcher.js';
export { PoisonedAdmin } from './poisoned-admin.js';
export type {
  CancelOutcome,
  PoisonedDetail,
  PoisonedTask,
  RetryOutcome,
} from './poisoned-admin.js';
export { Poisoner } from './poisoner.js';
export { JobBatcher } from './job-batcher.js';
