/**
 * What the chaos invariants read of a PostgreSQL results table: its rows, and how many row
 * writes it ever took. A row rewritten by a duplicate job would leave one row but two
 * writes, so each write is counted by a trigger into a sequence (no lock between writers).
 */
import pg from 'pg';
import { migrate, pgTables, PgResultsSink } from '../../src/storage/postgres/index.js';
import type { StoredResult } from '../../src/storage/results-sink.js';

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const writesSeq = (prefix: string) => `"${prefix}_test_writes"`;

/**
 * Migrates the prefix's tables (what a backend does on its first write; it then finds nothing
 * to do) and adds a trigger counting every row inserted or updated from now on.
 */
export async function countPgWrites(url: string, prefix: string): Promise<void> {
  const t = pgTables(prefix);
  const seq = writesSeq(prefix);
  const fn = `"${prefix}_test_count_write"`;
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    const client = await pool.connect();
    try {
      await migrate(client, t, { by: 'test' });
      await client.query(`CREATE SEQUENCE ${seq}`);
      await client.query(
        `CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM nextval('${seq.replaceAll("'", "''")}'); RETURN NEW; END $$`,
      );
      await client.query(
        `CREATE TRIGGER count_writes AFTER INSERT OR UPDATE ON ${t.results}
         FOR EACH ROW EXECUTE FUNCTION ${fn}()`,
      );
    } finally {
      client.release();
    }
  } finally {
    await pool.end();
  }
}

/** Row writes counted since {@link countPgWrites}. */
export const pgWrites = (url: string, prefix: string): Promise<number> =>
  withClient(url, async (c) => {
    const { rows } = await c.query<{ last_value: string; is_called: boolean }>(
      `SELECT last_value, is_called FROM ${writesSeq(prefix)}`,
    );
    return rows[0]?.is_called ? Number(rows[0].last_value) : 0;
  });

/** Rows in the results table (0 before it exists). */
export const pgRowCount = (url: string, prefix: string): Promise<number> =>
  withClient(url, async (c) => {
    const { rows } = await c.query<{ n: string | null }>(
      `SELECT CASE WHEN to_regclass($1) IS NULL THEN 0 ELSE 1 END AS n`,
      [pgTables(prefix).results],
    );
    if (Number(rows[0]?.n) === 0) return 0;
    const counted = await c.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${pgTables(prefix).results}`,
    );
    return Number(counted.rows[0]?.n ?? 0);
  });

/** Every row, as the sink reads it back, by `<runId>.<taskId>`. */
export async function pgRecords(url: string, prefix: string): Promise<Map<string, StoredResult>> {
  const runs = await withClient(url, async (c) =>
    (
      await c.query<{ run_id: string }>(`SELECT DISTINCT run_id FROM ${pgTables(prefix).results}`)
    ).rows.map((r) => r.run_id),
  );
  const sink = new PgResultsSink({ url, prefix, maxConnections: 1 });
  try {
    const records = new Map<string, StoredResult>();
    for (const runId of runs) {
      for (const r of await sink.list(runId)) records.set(`${r.runId}.${r.taskId}`, r);
    }
    return records;
  } finally {
    await sink.close();
  }
}
