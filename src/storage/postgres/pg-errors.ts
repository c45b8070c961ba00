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
  '3D000', // invalid_catalog_name: the database does not exist (yet)
  '28000', // invalid_authorization_specification
  '28P01', // invalid_password
  // A standby, or a primary demoted by a failover that DNS still points at: read-only.
  '25006', // read_only_sql_transaction
  '42501', // insufficient_privilege: a grant to fix, whatever the row
  '42P01', // undefined_table: dropped, or a restore from before it; the sink migrates again
]);

/**
 * Whole classes that say the same: 53, insufficient resources (disk full, out of memory, too
 * many connections); 55, object not in prerequisite state (a lock not available); 57,
 * operator intervention (shutdown, a statement cancelled by a timeout or an administrator).
 */
const UNAVAILABLE_CLASSES = ['53', '55', '57'];

/** node-postgres's own messages for a connection it could not make or lost. */
const LOST =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|connection is closed|Connection ended/i;

const sqlState = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

/**
 * `unavailable`: the database cannot be reached or cannot serve (class 08, 53, 55, 57, a
 * read-only or missing table, a missing grant, socket errors); `rejected`: it refuses this row (class 22, data exception, or 23, integrity
 * constraint violation), and would again; `retry`: anything else (a deadlock, a timeout of
 * one statement), worth the usual retries.
 */
export function classifyPgError(err: unknown): PgFailure {
  const code = sqlState(err);
  if (code !== undefined) {
    if (
      NODE_CODES.has(code) ||
      code.startsWith('08') ||
      UNAVAILABLE_STATES.has(code) ||
      UNAVAILABLE_CLASSES.includes(code.slice(0, 2))
    ) {
      return 'unavailable';
    }
    if (code.startsWith('22') || code.startsWith('23')) return 'rejected';
  }
  const message = err instanceof Error ? err.message : String(err);
  if (LOST.test(message)) return 'unavailable';
  return 'retry';
}

/** How much of the database's `detail` an error message keeps. */
const DETAIL_MAX = 200;

/**
 * The database's own words, with the SQLSTATE, constraint and column when it gave them. A
 * data or constraint error's detail quotes the row ("Failing row contains (...)"), that is
 * the task's output: it is left out, so no output is copied into error histories and logs.
 */
export function describePgError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const e = err as Error & { code?: unknown; constraint?: unknown; detail?: unknown };
  const parts = [e.message];
  const quotesRow = typeof e.detail === 'string' && /^Failing row contains/.test(e.detail);
  if (typeof e.detail === 'string' && e.detail !== '' && !quotesRow) {
    parts.push(e.detail.length > DETAIL_MAX ? `${e.detail.slice(0, DETAIL_MAX)}...` : e.detail);
  }
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
