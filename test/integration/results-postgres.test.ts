/**
 * The PostgreSQL results sink against a real PostgreSQL server (test/helpers/postgres.ts) and
 * a real nats-server: whole runs, duplicate and stale jobs, refused rows, a short outage, and
 * the migrations. The outage of minutes is in test/long/results-postgres-outage.test.ts.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { apiHandlers } from '../../src/backend/api/handlers/index.js';
import type { PoisonedDetail } from '../../src/backend/finalize/poisoned-admin.js';
import { FinalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { SonarClient } from '../../src/client/client.js';
import { finalizerPool } from '../../src/backend/finalize/index.js';
import { reconcilerLoop } from '../../src/backend/reconciler/index.js';
import { MIGRATIONS, migrate, pgTables, PgResultsSink } from '../../src/storage/postgres/index.js';
import { bodyOf, SinkUnavailableError } from '../../src/storage/results-sink.js';
import type { ResultRecord } from '../../src/storage/results-sink.js';
import { onMetricSignal } from '../../src/metrics.js';
import { createWorker } from '../../src/worker/worker.js';
import { eventually } from '../helpers/eventually.js';
import { FailureLog } from '../../src/backend/finalize/failure-log.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import { PG_PASSWORD, postgresPerFile } from '../helpers/postgres.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { startBackend } from '../helpers/test-backend.js';
import { freshPrefix } from '../helpers/topology.js';
import { TEST_ENV, runFileOf } from '../helpers/worker-fixtures.js';
import { seedFinalizing, taskIds } from '../helpers/finalize-fixtures.js';
import { DAY_MS, startSweepWorld, sweepNow } from '../helpers/sweep-world.js';
import type { TestBackend } from '../helpers/test-backend.js';
import pg from 'pg';

const run = promisify(execFile);
const world = finalizeWorldPerFile();
const postgres = postgresPerFile();

interface Row {
  run_id: string;
  task_id: string;
  attempt: number;
  attempt_id: string;
  state: string;
  output_json: unknown;
  output_bytes: string;
  started_at: Date | null;
  finished_at: Date | null;
  finalized_at: Date;
}

/** The result record of task t1 of step s1, its 2-byte output inline, with `over` on top. */
const inlineRecord = (over: Partial<ResultRecord>): ResultRecord => ({
  runId: 'r1',
  stepId: 's1',
  taskId: 't1',
  attemptId: 'a1',
  attempt: 1,
  startedAt: null,
  finishedAt: null,
  outputRef: 'inline',
  bytes: 2,
  kind: 'json',
  finalizedAt: '2026-01-01T00:00:00.000Z',
  ...over,
});

const rowsOf = (prefix: string, runId: string) =>
  postgres().query<Row>(
    `SELECT * FROM ${pgTables(prefix).results} WHERE run_id = $1 ORDER BY task_id`,
    [runId],
  );

/** `node bin/sonar.js ARGS` against this file's server, with `env` on top. */
async function sonar(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['bin/sonar.js', ...args], {
      env: { ...process.env, SONAR_LOG_LEVEL: 'silent', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err: unknown) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('the PostgreSQL results sink', () => {
  it('a 1,000-task run ends with 1,000 rows, read back by the SDK and `sonar results`', async () => {
    const nats = world.nats;
    const prefix = freshPrefix();
    const { log, lines } = recordingLogger();
    const env = { ...TEST_ENV, SONAR_RESULTS_URL: postgres().url, SONAR_FINALIZERS: '4' };
    const tb = await startBackend({
      url: nats.server.url,
      nc: nats.nc,
      prefix,
      env,
      components: [finalizerPool(), reconcilerLoop()],
      log,
    });
    const worker = createWorker({
      tags: ['a'],
      slots: 32,
      nc: nats.nc,
      prefix,
      drainGraceMs: '2s',
      handler: (input) => Promise.resolve({ echo: input }),
    });
    await worker.start();
    const client = new SonarClient(nats.nc, { prefix, resultsUrl: postgres().url });
    try {
      const file = runFileOf('big', [{ id: 's1', tags: ['a'], count: 1_000 }]);
      await client.submit({ ...file, steps: file.steps.map((st) => ({ ...st, output: 'json' })) });
      const status = await client.wait('big', { timeoutMs: 120_000 });
      expect(status.state).toBe('Succeeded');

      const rows = await rowsOf(prefix, 'big');
      expect(rows).toHaveLength(1_000);
      expect(new Set(rows.map((r) => r.task_id)).size).toBe(1_000);
      for (const r of rows) {
        expect(r).toMatchObject({ attempt: 1, state: 'Succeeded' });
        expect(r.output_json).toMatchObject({ echo: { n: expect.any(Number) as number } });
        expect(r.started_at!.getTime()).toBeLessThanOrEqual(r.finished_at!.getTime());
        expect(r.finished_at!.getTime()).toBeLessThanOrEqual(r.finalized_at.getTime() + 1_000);
      }
      const results = await client.results('big');
      expect(results).toHaveLength(1_000);
      expect(await client.output('big', 't7')).toEqual({ echo: { n: 8 } });

      const cli = await sonar(['results', 'big', '--task', 't7', '--json'], {
        SONAR_NATS_URL: nats.server.url,
        SONAR_PREFIX: prefix,
        SONAR_RESULTS_URL: postgres().url,
      });
      expect(cli.stderr).toBe('');
      expect(JSON.parse(cli.stdout)).toMatchObject({ taskId: 't7', json: { echo: { n: 8 } } });
      const list = await sonar(['results', 'big'], {
        SONAR_NATS_URL: nats.server.url,
        SONAR_PREFIX: prefix,
        SONAR_RESULTS_URL: postgres().url,
      });
      expect(list.stdout).toMatch(/1000 result\(s\)/);
      // The database's password is in no log line.
      expect(lines.length).toBeGreaterThan(0);
      expect(JSON.stringify(lines)).not.toContain(PG_PASSWORD);
    } finally {
      await worker.drain();
      await client.close();
      await tb.stop();
    }
  });

  it('duplicate and stale jobs leave one row per task, from its final attempt', async () => {
    const s = await world.scene();
    // Every third task took 3 attempts; jobs for its earlier attempts are stale.
    const attemptsOf = (t: string) => (Number(t.slice(1)) % 3 === 0 ? 3 : 1);
    const ids = taskIds(300);
    const jobs = await s.seed({ runId: 'dup', taskIds: ids, attemptsOf });
    const stale = jobs
      .filter((j) => j.attemptId === 'a3')
      .flatMap((j) => [
        { ...j, attemptId: 'a1' },
        { ...j, attemptId: 'a2' },
      ]);
    await s.startPool({ env: { SONAR_RESULTS_URL: postgres().url } });
    // Each job twice (a redelivery after a lost ack), under another msg id (round 1).
    await s.enqueue([...stale, ...jobs]);
    await s.enqueue(jobs, 1);
    await eventually(() => s.countIn('dup', 'Succeeded') === 300, { timeoutMs: 30_000 });
    const rows = await rowsOf(s.n.prefix, 'dup');
    expect(rows).toHaveLength(300);
    for (const r of rows) expect(r.attempt_id).toBe(`a${attemptsOf(r.task_id)}`);
  });

  it('upserts per attempt: a duplicate changes nothing, an older attempt never overwrites a newer one', async () => {
    const sink = new PgResultsSink({
      url: postgres().url,
      prefix: freshPrefix(),
      maxConnections: 2,
    });
    try {
      const record = (attempt: number, finalizedAt: string): ResultRecord =>
        inlineRecord({ attemptId: `a${attempt}`, attempt, bytes: 12, finalizedAt });
      const body = (v: string) => bodyOf(new TextEncoder().encode(JSON.stringify({ v })));
      const signal = new AbortController().signal;
      const t0 = '2026-01-01T00:00:00.000Z';
      expect(await sink.upsert(record(1, t0), body('one'), signal)).toBe('written');
      expect(await sink.upsert(record(1, t0), body('one'), signal)).toBe('unchanged');
      expect(await sink.upsert(record(2, t0), body('two'), signal)).toBe('written');
      expect(await sink.upsert(record(1, t0), body('one'), signal)).toBe('unchanged');
      expect(await sink.get('r1', 't1')).toMatchObject({ attemptId: 'a2', json: { v: 'two' } });
      await sink.purgeRun('r1');
      expect(await sink.list('r1')).toEqual([]);
    } finally {
      await sink.close();
    }
  });

  it('a row the database refuses ends poisoned, its message in `sonar poisoned show`', async () => {
    const s = await world.scene();
    const url = postgres().url;
    const b = await s.startPool({
      env: { SONAR_RESULTS_URL: url },
      backoffBase: 50,
      handlers: apiHandlers,
    });
    // An operator's own rule on the table: a constraint error (class 23).
    // The tables are made on the first write, or a probe.
    await b.ctx.results.probe?.();
    const table = pgTables(s.n.prefix).results;
    await postgres().query(
      `ALTER TABLE ${table} ADD CONSTRAINT no_rejects CHECK (output_json->>'reject' IS NULL)`,
    );
    const encoder = new TextEncoder();
    const outputs: Record<string, Uint8Array> = {
      // Refused by the operator's constraint.
      t1: encoder.encode('{"reject":true}'),
      // Valid JSON that jsonb cannot hold (a data error, class 22).
      t2: encoder.encode('{"nul":"\\u0000"}'),
      t3: encoder.encode('{"fine":true}'),
    };
    await s.seedAndEnqueue({
      runId: 'bad',
      taskIds: ['t1', 't2', 't3'],
      outputFor: (t) => outputs[t]!,
    });
    await eventually(
      () =>
        s.stateOf('bad', 't1') === 'Poisoned' &&
        s.stateOf('bad', 't2') === 'Poisoned' &&
        s.stateOf('bad', 't3') === 'Succeeded',
      { timeoutMs: 20_000 },
    );
    const show = async (task: string): Promise<PoisonedDetail> => {
      const out = await sonar(['poisoned', 'show', task, '--json'], {
        SONAR_NATS_URL: world.nats.server.url,
        SONAR_PREFIX: s.n.prefix,
      });
      expect(out.code, out.stderr).toBe(0);
      return JSON.parse(out.stdout) as PoisonedDetail;
    };
    const t1 = await show('bad.t1');
    // Poisoned at once: a refused row would be refused again.
    expect(t1.errors).toHaveLength(1);
    expect(t1.errors[0]).toMatchObject({ permanent: true });
    expect(t1.errors[0]!.error).toMatch(/violates check constraint "no_rejects".*SQLSTATE 23514/);
    expect(t1.poison?.error).toMatch(/no_rejects/);
    const t2 = await show('bad.t2');
    expect(t2.errors[0]!.error).toMatch(/unsupported Unicode escape sequence.*SQLSTATE 22P05/);
    expect(await rowsOf(s.n.prefix, 'bad')).toHaveLength(1);
  });

  it('a database down mid-burst pauses the pool: no delivery spent, nothing poisoned, nothing lost', async () => {
    const s = await world.scene({ finalizeLeaseMs: 2_000, finalizeMaxDeliver: 2 });
    const ids = taskIds(400);
    const jobs = await s.seed({ runId: 'out', taskIds: ids });
    const b = await s.startPool({
      env: { SONAR_RESULTS_URL: postgres().url, SONAR_FINALIZE_MAX_DELIVER: '2' },
      backoffBase: 50,
    });
    const signals: boolean[] = [];
    const unsubscribe = onMetricSignal((m) => {
      if (m.kind === 'sink-pause' && m.nodeId === b.ctx.nodeId) signals.push(m.paused);
    });
    await s.enqueue(jobs);
    await eventually(() => s.countIn('out', 'Succeeded') >= 50, { timeoutMs: 20_000 });
    await postgres().kill();
    // Down for longer than the job's deliveries would last at their backoff (2 x 50 ms, and
    // a lease of 2 s): only a pause saves them.
    await new Promise((r) => setTimeout(r, 6_000));
    const during = s.countIn('out', 'Succeeded');
    await postgres().restart();
    await eventually(() => s.countIn('out', 'Succeeded') === 400, { timeoutMs: 30_000 });
    expect(during).toBeLessThan(400);
    const pool = b.component(FinalizerPool);
    expect(pool.stats.pauses).toBeGreaterThanOrEqual(1);
    // The metrics were told: paused, then resumed (sonar_results_sink_paused 1, then 0).
    unsubscribe();
    expect(signals.slice(0, 2)).toEqual([true, false]);
    expect(signals.at(-1)).toBe(false);
    expect(pool.stats.poisoned).toBe(0);
    expect(s.countIn('out', 'Poisoned')).toBe(0);
    expect(await rowsOf(s.n.prefix, 'out')).toHaveLength(400);
    // No failure was recorded for any job: the outage spent no delivery.
    const failures = await FailureLog.open(world.nats.nc, s.n);
    for (const t of ids.slice(0, 400)) {
      expect(await failures.history('out', t, 'a1')).toEqual([]);
    }
  });
});

/**
 * Run `runId` of one task, finished (Succeeded) with its row in the table; each of `strays`
 * gets a row of the same task too, as a run this topology does not hold.
 */
async function seedFinishedRun(w: TestBackend, runId: string, strays: string[] = []) {
  const n = w.ctx.names;
  const [job] = await seedFinalizing(w.ctx.writer, n, { runId, taskIds: ['t1'] });
  for (const r of [runId, ...strays]) {
    await w.ctx.results.upsert(
      inlineRecord({
        runId: r,
        attemptId: job!.attemptId,
        finalizedAt: new Date().toISOString(),
      }),
      bodyOf(new TextEncoder().encode('{}')),
      new AbortController().signal,
    );
  }
  await w.write(n.subjects.task(runId, 't1'), 'TaskFinalized', {
    attemptId: job!.attemptId,
    resultKey: `${runId}.t1`,
  });
  await w.write(n.subjects.step(runId, 's1'), 'StepSucceeded', {});
  await w.write(n.subjects.run(runId), 'RunSucceeded', {});
}

describe('retention', () => {
  it('the full sweep deletes the rows of a run finished past SONAR_RETENTION, and only those', async () => {
    const w = await startSweepWorld(world.nats.nc, world.nats.server.url, {
      env: { SONAR_RESULTS_URL: postgres().url },
    });
    try {
      const n = w.ctx.names;
      // A row of a run this topology does not hold as finished: never purged.
      await seedFinishedRun(w, 'old', ['other']);
      expect((await sweepNow(w)).retention.purged).toEqual([]);
      expect(await rowsOf(n.prefix, 'old')).toHaveLength(1);
      const report = await sweepNow(w, { shiftMs: 31 * DAY_MS });
      expect(report.failed).toEqual([]);
      expect(report.retention.purged).toEqual(['old']);
      expect(await rowsOf(n.prefix, 'old')).toEqual([]);
      expect(await rowsOf(n.prefix, 'other')).toHaveLength(1);
    } finally {
      await w.stop();
    }
  });

  it('a run whose rows cannot be deleted waits for the next sweep; the runs after it are purged', async () => {
    const w = await startSweepWorld(world.nats.nc, world.nats.server.url, {
      env: { SONAR_RESULTS_URL: postgres().url },
    });
    const t = pgTables(w.ctx.names.prefix);
    try {
      const n = w.ctx.names;
      for (const runId of ['stuck', 'old']) await seedFinishedRun(w, runId);
      // The database refuses to delete the first run's rows (as a lost grant or a full disk
      // would), and only those.
      await postgres().query(
        `CREATE FUNCTION ${n.prefix.replace(/-/g, '_')}_refuse() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN IF OLD.run_id = 'stuck' THEN RAISE EXCEPTION 'no deletes today'; END IF; RETURN OLD; END $$`,
      );
      await postgres().query(
        `CREATE TRIGGER refuse BEFORE DELETE ON ${t.results} FOR EACH ROW
         EXECUTE FUNCTION ${n.prefix.replace(/-/g, '_')}_refuse()`,
      );
      const first = await sweepNow(w, { shiftMs: 31 * DAY_MS });
      expect(first.retention.purged).toEqual(['old']);
      expect(await rowsOf(n.prefix, 'old')).toEqual([]);
      expect(await rowsOf(n.prefix, 'stuck')).toHaveLength(1);
      // Its events are all still there: nothing of it was purged, it is tried again.
      expect(await w.ctx.store.lastSeqOf(n.subjects.run('stuck'))).toBeGreaterThan(0);

      await postgres().query(`DROP TRIGGER refuse ON ${t.results}`);
      const second = await sweepNow(w, { shiftMs: 31 * DAY_MS });
      expect(second.retention.purged).toEqual(['stuck']);
      expect(await rowsOf(n.prefix, 'stuck')).toEqual([]);
    } finally {
      await w.stop();
    }
  });
});

describe('when the database cannot take writes', () => {
  const record = inlineRecord({});
  const body = () => bodyOf(new TextEncoder().encode('{}'));
  const signal = new AbortController().signal;

  it('a dropped results table: the probe says so, then the sink builds it again and writes', async () => {
    const prefix = freshPrefix();
    const sink = new PgResultsSink({ url: postgres().url, prefix, maxConnections: 2 });
    try {
      await sink.probe();
      await postgres().query(`DROP TABLE ${pgTables(prefix).results}`);
      await expect(sink.upsert(record, body(), signal)).rejects.toBeInstanceOf(
        SinkUnavailableError,
      );
      // The pool's breaker probes until a write could land: the table is built again from the
      // first version, although the versions table still lists every one.
      await eventually(
        async () => {
          await sink.probe();
          return true;
        },
        { timeoutMs: 10_000 },
      );
      expect(await sink.upsert(record, body(), signal)).toBe('written');
      expect(await sink.list('r1')).toHaveLength(1);
    } finally {
      await sink.close();
    }
  });

  it('a read-only server and a user without the right to write pause the pool instead of spending deliveries', async () => {
    const prefix = freshPrefix();
    const owner = new PgResultsSink({ url: postgres().url, prefix, maxConnections: 1 });
    await owner.ready();
    await owner.close();
    const role = `ro_${prefix.replace(/-/g, '_')}`;
    await postgres().query(`CREATE ROLE ${role} LOGIN PASSWORD 'ro-pw'`);
    await postgres().query(`GRANT SELECT ON ${pgTables(prefix).results} TO ${role}`);
    const as = (user: string, password: string) => {
      const url = new URL(postgres().url);
      url.username = user;
      url.password = password;
      return url.toString();
    };
    // A user that may only read: every write is refused for want of a grant.
    const reader = new PgResultsSink({ url: as(role, 'ro-pw'), prefix, maxConnections: 1 });
    try {
      await expect(reader.probe()).rejects.toThrow(/results database|not writable|permission/);
      await expect(reader.upsert(record, body(), signal)).rejects.toBeInstanceOf(
        SinkUnavailableError,
      );
    } finally {
      await reader.close();
    }
    // A server answering read-only (a standby, or a demoted primary): SELECT 1 would pass.
    await postgres().query(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
    await postgres().query(
      `GRANT INSERT, UPDATE, DELETE ON ${pgTables(prefix).results} TO ${role}`,
    );
    const standby = new PgResultsSink({ url: as(role, 'ro-pw'), prefix, maxConnections: 1 });
    try {
      await expect(standby.probe()).rejects.toThrow(SinkUnavailableError);
      await expect(standby.upsert(record, body(), signal)).rejects.toBeInstanceOf(
        SinkUnavailableError,
      );
    } finally {
      await standby.close();
    }
  });
});

describe('migrations', () => {
  it('an upgrade from schema version 1 to 2 keeps every row', async () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual([1, 2]);
    const prefix = freshPrefix();
    const t = pgTables(prefix);
    const pool = new pg.Pool({ connectionString: postgres().url, max: 2 });
    try {
      const client = await pool.connect();
      try {
        expect(await migrate(client, t, { to: 1 })).toEqual({ from: 0, to: 1, applied: [1] });
        // Rows as a version-1 backend wrote them: no start or finish times.
        await client.query(
          `INSERT INTO ${t.results} (run_id, task_id, step_id, attempt, attempt_id, state,
             output_kind, output_ref, output_json, output_bytes, finalized_at)
           SELECT 'old', 't' || i, 's1', 1, 'a1', 'Succeeded', 'json', 'inline',
             jsonb_build_object('n', i), 8, now()
           FROM generate_series(1, 500) AS i`,
        );
      } finally {
        client.release();
      }
      // A version-2 backend's sink migrates before its first write, then reads the old rows.
      const sink = new PgResultsSink({ url: postgres().url, prefix, maxConnections: 2 });
      try {
        expect(await sink.list('old')).toHaveLength(500);
        expect(await sink.ready()).toEqual({ from: 1, to: 2, applied: [2] });
        const old = await sink.list('old');
        expect(old).toHaveLength(500);
        expect(old.find((r) => r.taskId === 't42')).toMatchObject({
          json: { n: 42 },
          startedAt: null,
          finishedAt: null,
        });
      } finally {
        await sink.close();
      }
      const versions = await postgres().query<{ version: number }>(
        `SELECT version FROM ${t.migrations} ORDER BY version`,
      );
      expect(versions.map((v) => v.version)).toEqual([1, 2]);
      const [{ n }] = (await postgres().query<{ n: string }>(
        `SELECT count(*) AS n FROM ${t.results} WHERE output_json ? 'n'`,
      )) as [{ n: string }];
      expect(Number(n)).toBe(500);
    } finally {
      await pool.end();
    }
  });

  it('backends migrating at once do not race: each version is applied once', async () => {
    const prefix = freshPrefix();
    const sinks = Array.from(
      { length: 4 },
      (_, i) =>
        new PgResultsSink({ url: postgres().url, prefix, maxConnections: 1, by: `backend-${i}` }),
    );
    try {
      const reports = await Promise.all(sinks.map((s) => s.ready()));
      expect(reports.flatMap((r) => r.applied).sort()).toEqual([1, 2]);
      const versions = await postgres().query<{ version: number }>(
        `SELECT version FROM ${pgTables(prefix).migrations} ORDER BY version`,
      );
      expect(versions.map((v) => v.version)).toEqual([1, 2]);
    } finally {
      await Promise.all(sinks.map((s) => s.close()));
    }
  });

  it('a read before any write finds no table and no result, and creates nothing', async () => {
    const prefix = freshPrefix();
    const sink = new PgResultsSink({ url: postgres().url, prefix, maxConnections: 1 });
    try {
      expect(await sink.list('r1')).toEqual([]);
      expect(await sink.get('r1', 't1')).toBeNull();
      const found = await postgres().query<{ t: string | null }>('SELECT to_regclass($1) AS t', [
        pgTables(prefix).migrations,
      ]);
      expect(found[0]?.t).toBeNull();
    } finally {
      await sink.close();
    }
  });

  it('a database at a newer version than this build knows is refused, not written', async () => {
    const prefix = freshPrefix();
    const sink = new PgResultsSink({ url: postgres().url, prefix, maxConnections: 1 });
    try {
      await sink.ready();
      await postgres().query(
        `INSERT INTO ${pgTables(prefix).migrations} (version, name) VALUES (99, 'from the future')`,
      );
      const fresh = new PgResultsSink({ url: postgres().url, prefix, maxConnections: 1 });
      await expect(fresh.ready()).rejects.toThrow(/schema version 99, newer than this Sonar knows/);
      await fresh.close();
    } finally {
      await sink.close();
    }
  });
});
