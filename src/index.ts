/**
 * Sonar's public SDK (STYLE.md C8): explicit named exports, types separately.
 *
 * - Workers: `createWorker({ tags, slots, handler, schema? }).run()` (SIGTERM and SIGINT
 *   drain it), or `handlers: { [stepId]: fn | step({ schema, handler }) }`; a handler gets the
 *   task input (the schema's output) and `{ signal, runId, taskId, attemptId, ... }`; throw
 *   `NonRetryableError` to fail a task without retries.
 * - Clients: `SonarClient` (`connect`, `fromEnv`) submits run files (chunked), cancels runs
 *   and tasks, and reads a run: `status`, `watch` (its updates as they come), `wait` (its end),
 *   `results` and `output`.
 *
 * @module
 */
export { createWorker, Worker } from './worker/worker.js';
export { step } from './worker/handler-routing.js';
export { createLogger, silentLogger } from './log.js';
export { NonRetryableError, IllegalStateError } from './worker/errors.js';
export { ApiError } from './worker/api-client.js';
export { SonarClient } from './client/client.js';
export { validateRunFile, runFileHash } from './run-file.js';
export {
  SonarError,
  ValidationError,
  IllegalTransitionError,
  ErrorCode,
} from '../actors/errors.js';
export { loadConfig, ConfigError } from './config.js';

export type { WorkerState } from './worker/worker.js';
export type {
  WorkerOptions,
  TaskHandler,
  StepHandler,
  HandlerContext,
  LogStream,
} from './worker/options.js';
export type { Logger } from './log.js';
export type { ConnectSettings } from './nats.js';
export type { CommandPolicy, CommandsOption } from './worker/command-policy.js';
export type {
  SonarClientOptions,
  Submitted,
  RunStatus,
  RunUpdate,
  TaskResult,
  TaskLogOptions,
  LogChunk,
  TaskProgress,
} from './client/client.js';
export type { RunState } from '../actors/run/run.machine.js';
export type { StepState } from '../actors/step/step.machine.js';
export type { TaskState } from '../actors/task/task.machine.js';
export type { RunFile } from './protocol.js';
export type { SonarConfig } from './config.js';
