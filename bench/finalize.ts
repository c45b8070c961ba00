/**
 * Finalizer benchmark: jobs/s through the finalizer pool against raw consume+ack of
 * the same number of messages, in one run on one throwaway nats-server. Prints one table.
 *   npm run bench:finalize            (JOBS=5000 by default)
 *
 * Each pool job is what production does: check the task in the projection, read the output
 * (inline, or a stat then a chunked read of the `sonar_outputs` object store), validate the
 * JSON as it streams, upsert into `sonar_results` (get + put), append TaskFinalized with
 * optimistic concurrency and wait for the projection to apply it, ack. Raw consume+ack is the ceiling of the queue alone.
 *
 * The same pools run again with the PostgreSQL sink (`SONAR_RESULTS_URL`): one upsert per
 * job into a throwaway PostgreSQL server on loopback (test/helpers/postgres.ts) with its
 * durability settings on (fsync, synchronous_commit), so the figure is that of a database
 * that keeps what it acknowledged. Without PostgreSQL installed those rows are skipped.
 */
import { FinalizerPool } from '../src/backend/finalize/finalizer-pool.js';
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { names } from '../streams/names.js';
import { ensureTopology } from '../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../streams/topology.js';
import { startNatsServer } from '../src/dev/nats-server.js';
import { startPoolBackend } from '../test/helpers/finalize-backend.js';
import { postgresBinDir, startPostgres } from '../test/helpers/postgres.js';
import {
  ObjOutputStore,
  enqueueAll,
  openWriter,
  seedFinalizing,
  taskIds,
} from '../test/helpers/finalize-fixtures.js';

const JOBS = Number(process.env['JOBS'] ?? 5_000);
let prefixes = 0;

interface Row {
  what: string;
  sink: string;
  jobs: number;
  seconds: number;
}

/** Raw work-queue consume+ack: `lanes` serial pullers (fetch 1, ack), or one `consume()`. */
async function raw(nc: NatsConnection, mode: 'consume' | number): Promise<Row> {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const stream = `BENCH_RAW_${++prefixes}`;
  await jsm.streams.add({
    name: stream,
    subjects: [`bench${prefixes}.>`],
    retention: RetentionPolicy.Workqueue,
  });
  await jsm.consumers.add(stream, { durable_name: 'c', ack_policy: AckPolicy.Explicit });
  const body = new TextEncoder().encode(
    JSON.stringify({
      runId: 'r',
      taskId: 't',
      attemptId: 'a1',
      outputRef: 'inline',
      outputInline: 'eyJvayI6dHJ1ZX0=',
    }),
  );
  for (let i = 0; i < JOBS; i += 1_000) {
    await Promise.all(
      Array.from({ length: Math.min(1_000, JOBS - i) }, (_, k) =>
        js.publish(`bench${prefixes}.r.t${i + k}`, body),
      ),
    );
  }
  const consumer = await js.consumers.get(stream, 'c');
  let acked = 0;
  const started = performance.now();
  if (mode === 'consume') {
    const msgs = await consumer.consume({ max_messages: 1_000 });
    for await (const m of msgs) {
      m.ack();
      if (++acked === JOBS) break;
    }
    await msgs.close();
  } else {
    const lane = async () => {
      while (acked < JOBS) {
        const batch = await consumer.fetch({ max_messages: 1, expires: 1_000 });
        for await (const m of batch) {
          m.ack();
          acked++;
        }
      }
    };
    await Promise.all(Array.from({ length: mode }, lane));
  }
  const seconds = (performance.now() - started) / 1000;
  await jsm.streams.delete(stream);
  const what = mode === 'consume' ? 'raw consume() + ack' : `raw fetch(1) + ack, ${mode} lanes`;
  return { what, sink: '-', jobs: JOBS, seconds };
}

/**
 * JOBS tasks put into Finalizing (not timed), then their jobs through a pool of `size`, into
 * the KV bucket or, given `postgres`, its table.
 */
async function pool(
  nc: NatsConnection,
  url: string,
  size: number,
  stored: boolean,
  postgres?: { url: string; label: string },
): Promise<Row> {
  const n = names(`bench${++prefixes}`);
  await ensureTopology(await jetstreamManager(nc), n, DEFAULT_TOPOLOGY_OPTIONS);
  const w = await openWriter(nc, n);
  const outputs = await ObjOutputStore.open(nc, n);
  const jobs = await seedFinalizing(w.writer, n, {
    runId: 'bench',
    taskIds: taskIds(JOBS),
    outputs,
    stored: () => stored,
  });
  const b = await startPoolBackend(nc, url, n, {
    outputStore: outputs,
    env: {
      SONAR_FINALIZERS: String(size),
      ...(postgres && { SONAR_RESULTS_URL: postgres.url }),
    },
  });
  const { stats } = b.component(FinalizerPool);
  const started = performance.now();
  await enqueueAll(nc, n, jobs);
  while (stats.finalized < JOBS) {
    if (stats.failed > 0) throw new Error(`${stats.failed} jobs failed`);
    await new Promise((r) => setTimeout(r, 5));
  }
  const seconds = (performance.now() - started) / 1000;
  await b.stop();
  await w.stop();
  const what = `pool of ${size}, ${stored ? 'outputs in the object store' : 'inline outputs'}`;
  return { what, sink: postgres?.label ?? 'KV', jobs: JOBS, seconds };
}

async function main(): Promise<void> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const postgres =
    postgresBinDir() === null
      ? null
      : await startPostgres({
          settings: { fsync: 'on', synchronous_commit: 'on', full_page_writes: 'on' },
        });
  if (!postgres) console.log('PostgreSQL is not installed: its rows are skipped');
  try {
    const rows: Row[] = [];
    rows.push(await raw(nc, 'consume'));
    rows.push(await raw(nc, 4));
    // KV and PostgreSQL side by side, in this one run, for the pool of 4 (the default).
    const durable = postgres && { url: postgres.url, label: 'PostgreSQL' };
    for (const stored of [false, true]) {
      rows.push(await pool(nc, server.url, 4, stored));
      if (durable) rows.push(await pool(nc, server.url, 4, stored, durable));
    }
    // What the commit's WAL flush costs: the same server, its sessions not waiting for it.
    if (postgres) {
      const url = `${postgres.url}?options=${encodeURIComponent('-c synchronous_commit=off')}`;
      rows.push(
        await pool(nc, server.url, 4, false, { url, label: 'PostgreSQL, synchronous_commit off' }),
      );
    }
    rows.push(await pool(nc, server.url, 16, false));
    rows.push(await pool(nc, server.url, 16, true));
    const base = rows[0]!.jobs / rows[0]!.seconds;
    printTable(
      ['path', 'sink', 'jobs', 'seconds', 'jobs/s', 'vs raw consume'],
      rows.map((r) => {
        const rate = r.jobs / r.seconds;
        return [
          r.what,
          r.sink,
          String(r.jobs),
          r.seconds.toFixed(2),
          Math.round(rate).toLocaleString('en-US'),
          `${((rate / base) * 100).toFixed(1)}%`,
        ];
      }),
    );
  } finally {
    await nc.close();
    await server.stop();
    await postgres?.stop();
  }
}

function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(line(head));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
}

await main();
