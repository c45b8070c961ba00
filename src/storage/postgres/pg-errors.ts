/**
 * What a PostgreSQL failure means for the finalization that met it (docs/results-postgres.md,
 * Errors). node-postgres gives a `DatabaseError` with the SQLSTATE in `code` for what the
 * server said, and a plain Node error (`ECONNREFUSED`...) or one of its own messages for a
 * connection that could not be made or was lost.
 */
import { SinkRejectedError, SinkUnavailableError } from '../results-sink.js';

export type PgFailure = 'unavailable' | 'rejected' | 'retry';

/** Socket errors: the server is not there, or the connection broke. */
const NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs that say the database cannot serve now, whatever the row: the server shutting
 * down or starting up, out of connections, or refusing who we are (a setting to fix, not a
 * row to poison).
 */
const UNAVAILABLE_STATES = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, in recovery)
  '53300', // too_many_connections
  '3D000', // invalid_catalog_name: the database does not exist (yet)
  '28000', // invalid_authorization_specification
  '28P01', // invalid_password
]);

/** node-postgres's own messages for a connection it could not make or lost. */
const LOST =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|connection is closed|Connection ended/i;

const sqlState = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

/**
 * `unavailable`: the database cannot be reached or cannot serve (class 08, shutdown, socket
 * errors); `rejected`: it refuses this row (class 22, data exception, or 23, integrity
 * constraint violation), and would again; `retry`: anything else (a deadlock, a timeout of
 * one statement), worth the usual retries.
 */
export function classifyPgError(err: unknown): PgFailure {
  const code = sqlState(err);
  if (code !== undefined) {
    if (NODE_CODES.has(code) || code.startsWith('08') || UNAVAILABLE_STATES.has(code)) {
      return 'unavailable';
    }
    if (code.startsWith('22') || code.startsWith('23')) return 'rejected';
  }
  const message = err instanceof Error ? err.message : String(err);
  if (LOST.test(message)) return 'unavailable';
  return 'retry';
}

/** The database's own words, with the SQLSTATE, constraint and column when it gave them. */
export function describePgError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const e = err as Error & { code?: unknown; constraint?: unknown; detail?: unknown };
  const parts = [e.message];
  if (typeof e.detail === 'string' && e.detail !== '') parts.push(e.detail);
  const code = typeof e.code === 'string' ? ` (SQLSTATE ${e.code})` : '';
  return `${parts.join(': ')}${code}`;
}

/**
 * `err` as the error a sink throws: {@link SinkUnavailableError} or
 * {@link SinkRejectedError} by its class, else `err` itself. `what` names the write
 * (`upsert of <runId>.<taskId>`).
 */
export function sinkErrorOf(err: unknown, what: string): unknown {
  switch (classifyPgError(err)) {
    case 'unavailable':
      return new SinkUnavailableError(
        `results database unavailable (${what}): ${describePgError(err)}`,
        {
          cause: err,
        },
      );
    case 'rejected':
      return new SinkRejectedError(
        `results database refused ${what}: ${describePgError(err)}`,
        {},
        { cause: err },
      );
    case 'retry':
      return err;
  }
}
