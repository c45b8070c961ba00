import pg from 'pg';
import type { Pool, PoolConfig } from 'pg';
import type { Logger } from '../../log.js';
import type {
  OutputBody,
  ResultRecord,
  ResultsReader,
  ResultsSink,
  StoredResult,
  UpsertOutcome,
} from '../results-sink.js';
import { resultKeyOf, SinkUnavailableError } from '../results-sink.js';
import { describePgError, sinkErrorOf } from './pg-errors.js';
import { migrate, pgTables } from './migrations.js';
import type { MigrateReport, PgTables } from './migrations.js';

export interface PgResultsSinkOptions {
  /** `SONAR_RESULTS_URL`. Read by node-postgres (sslmode included); never logged. */
  url: string;
  /** `SONAR_PREFIX`: the tables are `<prefix>_results` and `<prefix>_migrations`. */
  prefix: string;
  /**
   * Connections at most: the finalizer pool's size, so that the pool's bound is the
   * database's too (one connection per job in hand).
   */
  maxConnections: number;
  /** Who migrates (the backend's nodeId), recorded beside each version it applies. */
  by?: string;
  log?: Logger;
  /**
   * How long opening a connection may take before it counts as the database unreachable.
   * @defaultValue 5 s
   */
  connectTimeoutMs?: number;
  /**
   * How long one statement may take before its connection is given up (node-postgres's
   * `query_timeout`): the bound on a write to a database that stopped answering.
   * @defaultValue 30 s
   */
  queryTimeoutMs?: number;
}

/** A row of the results table as node-postgres returns it (int8 as a string). */
interface ResultRow {
  run_id: string;
  task_id: string;
  step_id: string;
  attempt: number;
  attempt_id: string;
  output_kind: 'json' | 'bytes';
  output_ref: string;
  output_json: unknown;
  output_inline: Buffer | null;
  output_bytes: string;
  finalized_at: Date;
  started_at?: Date | null;
  finished_at?: Date | null;
}

const decoder = new TextDecoder();
/** A migration's statement bound: generous, since one may build an index over every row. */
const MIGRATION_TIMEOUT_MS = 15 * 60_000;
/** Rows one statement of a run's purge deletes. */
const PURGE_BATCH = 10_000;
// Undefined: a column a table of an older schema version lacks (a reader may come first).
const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

/**
 * The PostgreSQL results sink (docs/results-postgres.md): one row per task in
 * `<prefix>_results`, upserted by the finalizers. The upsert is idempotent per attempt and
 * ordered by it: a duplicate job of the same attempt changes nothing, an older attempt's job
 * never overwrites a newer attempt's row. The schema is migrated on first use, so a backend
 * starts whether or not the database is up; until it is, every write fails with
 * {@link SinkUnavailableError} and the finalizer pool waits.
 */
export class PgResultsSink implements ResultsSink, ResultsReader {
  readonly tables: PgTables;
  private readonly pool: Pool;
  private migrated: Promise<MigrateReport> | null = null;

  constructor(private readonly opts: PgResultsSinkOptions) {
    this.tables = pgTables(opts.prefix);
    const config: PoolConfig = {
      connectionString: opts.url,
      max: opts.maxConnections,
      connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
      query_timeout: opts.queryTimeoutMs ?? 30_000,
      application_name: 'sonar',
    };
    this.pool = new pg.Pool(config);
    // An idle connection that the server drops (a restart, a failover) is reported here;
    // unhandled, it would end the process. The next query opens a fresh one.
    this.pool.on('error', (err) => {
      opts.log?.warn('results database connection lost', { error: describePgError(err) });
    });
  }

  /** Creates or upgrades the tables once; a failed attempt is tried again by the next call. */
  ready(): Promise<MigrateReport> {
    this.migrated ??= this.migrateNow().catch((err: unknown) => {
      this.migrated = null;
      throw sinkErrorOf(err, `migration of ${this.tables.results}`);
    });
    return this.migrated;
  }

  /**
   * Migrates on a connection of its own, not one of the pool's: a migration may build an
   * index over every row, which the pool's statement bound would cut short on every try.
   */
  private async migrateNow(): Promise<MigrateReport> {
    const client = new pg.Client({
      connectionString: this.opts.url,
      connectionTimeoutMillis: this.opts.connectTimeoutMs ?? 5_000,
      query_timeout: MIGRATION_TIMEOUT_MS,
      application_name: 'sonar',
    });
    // A connection the server drops while idle is reported here; the query that follows fails.
    client.on('error', () => {});
    try {
      await client.connect();
      const report = await migrate(client, this.tables, { by: this.opts.by });
      if (report.applied.length > 0) {
        this.opts.log?.info('results table migrated', {
          table: this.tables.results,
          ...report,
        });
      }
      return report;
    } finally {
      await client.end().catch(() => {});
    }
  }

  async upsert(
    record: ResultRecord,
    output: OutputBody,
    signal: AbortSignal,
  ): Promise<UpsertOutcome> {
    const key = resultKeyOf(record.runId, record.taskId);
    const small = output.small;
    const json = small && record.kind === 'json' ? decoder.decode(small) : null;
    const inline = small && record.kind === 'bytes' ? Buffer.from(small) : null;
    const res = await this.query(
      `upsert of ${key}`,
      signal,
      `INSERT INTO ${this.tables.results} AS r (run_id, task_id, step_id, attempt, attempt_id,
         state, output_kind, output_ref, output_json, output_inline, output_bytes,
         started_at, finished_at, finalized_at)
       VALUES ($1, $2, $3, $4, $5, 'Succeeded', $6, $7, $8::jsonb, $9, $10, $11, $12, $13)
       ON CONFLICT (run_id, task_id) DO UPDATE SET
         step_id = excluded.step_id, attempt = excluded.attempt,
         attempt_id = excluded.attempt_id, state = excluded.state,
         output_kind = excluded.output_kind, output_ref = excluded.output_ref,
         output_json = excluded.output_json, output_inline = excluded.output_inline,
         output_bytes = excluded.output_bytes, started_at = excluded.started_at,
         finished_at = excluded.finished_at, finalized_at = excluded.finalized_at
       WHERE r.attempt < excluded.attempt`,
      [
        record.runId,
        record.taskId,
        record.stepId,
        record.attempt,
        record.attemptId,
        record.kind,
        record.outputRef,
        json,
        inline,
        output.bytes,
        record.startedAt,
        record.finishedAt,
        record.finalizedAt,
      ],
      `sonar-upsert-${this.opts.prefix}`,
    );
    // No row: the table already holds this attempt (a duplicate job) or a newer one (this
    // job is stale, and its TaskFinalized will be refused).
    return res.rowCount === 1 ? 'written' : 'unchanged';
  }

  /**
   * Answers only when a write could succeed: connected, migrated, the table there, the server
   * a primary (a standby answers `SELECT 1` too) and ours the right to write the table. So a
   * paused pool resumes when its writes can land, not at the first answer.
   */
  async probe(): Promise<void> {
    const res = await this.query<{
      standby: boolean;
      read_only: string;
      can_write: boolean | null;
    }>(
      'probe',
      undefined,
      `SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only,
         CASE WHEN to_regclass($1) IS NULL THEN NULL
              ELSE has_table_privilege($1, 'INSERT, UPDATE, DELETE') END AS can_write`,
      [this.tables.results],
    );
    const row = res.rows[0];
    let why: string | null = null;
    if (row?.standby === true || row?.read_only === 'on') why = 'the server is read-only';
    else if (row?.can_write === null) {
      this.migrated = null; // gone since it was created: the next call creates it again
      why = `the table ${this.tables.results} is missing`;
    } else if (row?.can_write !== true) {
      why = `this user may not write ${this.tables.results} (INSERT, UPDATE, DELETE)`;
    }
    if (why !== null) throw new SinkUnavailableError(`results database not writable: ${why}`);
  }

  /**
   * Deletes a run's rows a batch at a time, so a run of a million tasks needs no statement
   * longer than the sink's statement bound.
   */
  async purgeRun(runId: string): Promise<void> {
    for (;;) {
      const res = await this.query(
        `purge of run ${runId}`,
        undefined,
        `DELETE FROM ${this.tables.results} WHERE ctid IN (
           SELECT ctid FROM ${this.tables.results} WHERE run_id = $1 LIMIT ${PURGE_BATCH})`,
        [runId],
      );
      if ((res.rowCount ?? 0) < PURGE_BATCH) return;
    }
  }

  async get(runId: string, taskId: string): Promise<StoredResult | null> {
    const rows = await this.read(
      `read of ${resultKeyOf(runId, taskId)}`,
      `SELECT * FROM ${this.tables.results} WHERE run_id = $1 AND task_id = $2`,
      [runId, taskId],
    );
    return rows[0] ? storedOf(rows[0]) : null;
  }

  async list(runId: string): Promise<StoredResult[]> {
    const rows = await this.read(
      `read of run ${runId}`,
      // COLLATE "C": byte order, as the KV sink sorts, whatever the database's collation.
      `SELECT * FROM ${this.tables.results} WHERE run_id = $1 ORDER BY task_id COLLATE "C"`,
      [runId],
    );
    return rows.map(storedOf);
  }

  /**
   * A read migrates nothing: a reader (`sonar results`) may hold a user allowed only to
   * SELECT. Before any backend wrote, there is no table, and so no result.
   */
  private async read(what: string, sql: string, values: unknown[]): Promise<ResultRow[]> {
    try {
      return (await this.pool.query<ResultRow>(sql, values)).rows;
    } catch (err: unknown) {
      if ((err as { code?: unknown }).code === '42P01') return [];
      throw sinkErrorOf(err, what);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  /** Runs one statement after the migration, with the sink's error classes. */
  private async query<R extends object = Record<string, unknown>>(
    what: string,
    signal: AbortSignal | undefined,
    sql: string,
    values: unknown[] = [],
    /** A prepared statement's name: parsed and planned once per connection, not per job. */
    name?: string,
  ): Promise<pg.QueryResult<R>> {
    await this.ready();
    // node-postgres cannot cancel a statement in flight; query_timeout bounds it instead.
    if (signal?.aborted) throw new SinkUnavailableError(`${what} gave up: its deadline passed`);
    try {
      return await this.pool.query<R>(name ? { name, text: sql, values } : { text: sql, values });
    } catch (err: unknown) {
      // The table is gone (dropped, or a database restored from before it): migrate again
      // on the next call rather than fail every job until a restart.
      if ((err as { code?: unknown }).code === '42P01') this.migrated = null;
      throw sinkErrorOf(err, what);
    }
  }
}

function storedOf(row: ResultRow): StoredResult {
  const r: StoredResult = {
    runId: row.run_id,
    stepId: row.step_id,
    taskId: row.task_id,
    attemptId: row.attempt_id,
    attempt: row.attempt,
    startedAt: iso(row.started_at),
    finishedAt: iso(row.finished_at),
    outputRef: row.output_ref,
    bytes: Number(row.output_bytes),
    kind: row.output_kind,
    finalizedAt: row.finalized_at.toISOString(),
  };
  if (row.output_json !== null) r.json = row.output_json;
  if (row.output_inline !== null) r.inline = row.output_inline.toString('base64');
  return r;
}
