/** The PostgreSQL results sink's entrance: what the rest of Sonar may use of it. */
export { MIGRATIONS, SCHEMA_VERSION, migrate, pgTables } from './migrations.js';
export type { MigrateReport, Migration, PgTables } from './migrations.js';
export { classifyPgError, describePgError } from './pg-errors.js';
export type { PgFailure } from './pg-errors.js';
export { PgResultsSink } from './pg-results-sink.js';
export type { PgResultsSinkOptions } from './pg-results-sink.js';
export { maskResultsUrl, parseResultsUrl, SSL_MODES } from './pg-url.js';
