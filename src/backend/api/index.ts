/** The api component's entrance: what the rest of Sonar may use of it. */
export { ApiService, validationErrorOf } from './api-service.js';
export type { ApiCall, Handlers } from './api-service.js';
export { ReaderConsumers } from './reader-consumers.js';
export { DispatchPulls } from './dispatch-pulls.js';
export { Enrollments } from './enrollments.js';
export type { WorkerCredentialIssuer } from './handlers/enrollment-handlers.js';
export { apiHandlers } from './handlers/index.js';
export { workerCredentialIssuer } from './worker-credentials.js';
