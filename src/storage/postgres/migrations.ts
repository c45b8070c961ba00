/**
 * The results table's schema, created and upgraded by Sonar itself: an ordered list of
 * migrations, the versions applied recorded in `<prefix>_migrations`, every upgrade in one
 * transaction under an advisory lock, so backends starting together never race (the second
 * waits, then finds nothing left to do). PostgreSQL's DDL is transactional: a migration cut
 * short leaves the schema as it was.
 */
import type { ClientBase } from 'pg';
import { SinkUnavailableError } from '../results-sink.js';

/** The quoted names of a prefix's tables. */
export interface PgTables {
  /** `"<prefix>_results"`: one row per task. */
  results: string;
  /** `"<prefix>_migrations"`: one row per schema version applied. */
  migrations: string;
  /** The migrations table's name unquoted: the advisory lock's key. */
  lockName: string;
}

/**
 * The table names of a topology prefix, beside its `<prefix>_results` KV bucket. A prefix is
 * lowercase letters, digits, `_` and `-` (streams/names.ts), so it is safe inside quotes.
 */
export function pgTables(prefix: string): PgTables {
  return {
    results: `"${prefix}_results"`,
    migrations: `"${prefix}_migrations"`,
    lockName: `${prefix}_migrations`,
  };
}

export interface Migration {
  version: number;
  /** What it does, in a few words: stored beside the version. */
  name: string;
  /** Its statements, run in order inside the upgrade's transaction. */
  statements: (t: PgTables) => string[];
}

/**
 * Every schema version, oldest first. Never edit a shipped one: add the next. Each must keep
 * every row (docs/results-postgres.md, Migrations).
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'results table',
    statements: (t) => [
      `CREATE TABLE ${t.results} (
        run_id text NOT NULL,
        task_id text NOT NULL,
        step_id text NOT NULL,
        attempt integer NOT NULL,
        attempt_id text NOT NULL,
        state text NOT NULL,
        output_kind text NOT NULL CHECK (output_kind IN ('json', 'bytes')),
        output_ref text NOT NULL,
        output_json jsonb,
        output_inline bytea,
        output_bytes bigint NOT NULL,
        finalized_at timestamptz NOT NULL,
        PRIMARY KEY (run_id, task_id)
      )`,
    ],
  },
  {
    version: 2,
    name: 'attempt start and finish times',
    statements: (t) => [
      `ALTER TABLE ${t.results} ADD COLUMN started_at timestamptz, ADD COLUMN finished_at timestamptz`,
      `CREATE INDEX ON ${t.results} (finalized_at)`,
    ],
  },
];

/** The version this build writes rows for. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

export interface MigrateReport {
  from: number;
  to: number;
  applied: number[];
}

/**
 * Brings the tables up to `to` (default: {@link SCHEMA_VERSION}) on `client`, in one
 * transaction holding a transaction-scoped advisory lock on the migrations table's name.
 * @throws SinkUnavailableError when the database is at a version newer than this build
 * knows: an older backend must not write rows of a shape it does not know.
 */
export async function migrate(
  client: ClientBase,
  t: PgTables,
  opts: { to?: number; by?: string } = {},
): Promise<MigrateReport> {
  const to = opts.to ?? SCHEMA_VERSION;
  await client.query('BEGIN');
  try {
    // Before anything else, even the CREATE below: two sessions creating the same table at
    // once can both pass IF NOT EXISTS, and one then fails on the catalog's unique index.
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [t.lockName]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${t.migrations} (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now(),
        applied_by text
      )`,
    );
    const { rows } = await client.query<{ v: number }>(
      `SELECT coalesce(max(version), 0)::integer AS v FROM ${t.migrations}`,
    );
    const recorded = rows[0]?.v ?? 0;
    // A results table dropped, or a database restored without it, while the versions stay
    // recorded: build it again from the first version, or every write would fail.
    const { rows: present } = await client.query<{ there: boolean }>(
      'SELECT to_regclass($1) IS NOT NULL AS there',
      [t.results],
    );
    const rebuild = recorded > 0 && present[0]?.there !== true;
    const from = rebuild ? 0 : recorded;
    if (recorded > SCHEMA_VERSION) {
      throw new SinkUnavailableError(
        `the results table ${t.results} is at schema version ${recorded}, newer than this Sonar knows (${SCHEMA_VERSION}): upgrade this backend`,
      );
    }
    const applied: number[] = [];
    for (const m of MIGRATIONS) {
      if (m.version <= from || m.version > to) continue;
      for (const sql of m.statements(t)) await client.query(sql);
      await client.query(
        `INSERT INTO ${t.migrations} (version, name, applied_by) VALUES ($1, $2, $3)
         ON CONFLICT (version) DO UPDATE SET name = excluded.name,
           applied_at = now(), applied_by = excluded.applied_by`,
        [m.version, m.name, opts.by ?? null],
      );
      applied.push(m.version);
    }
    await client.query('COMMIT');
    return { from, to: Math.max(from, applied.at(-1) ?? from), applied };
  } catch (err: unknown) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
