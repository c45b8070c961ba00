/**
 * Memory over a deployment's life: prints one table row per cycle.
 *   npm run bench:memory [-- --cycles 10 --tasks 50000 --retention 5s --workers 4 --slots 16]
 *
 * One long-lived backend (child: `bin/sonar.js backend`, its shebang's node flags) with a short
 * SONAR_RETENTION and a full sweep due every 2 s, on a nats-server with file storage (child).
 * Each cycle starts fresh SDK worker processes (new ids, as disposable workers do), submits a
 * run of `--tasks` tasks (each with a `--input-bytes` input) through the client SDK, waits
 * until the run succeeded, drains the workers (they leave), then waits until the sweep has
 * purged the run and appended its `RunExpired`. Then it samples the backend's RSS, what its
 * projection holds (tasks and workers, from its /metrics), the stored projection snapshot and
 * the events stream. At the end the backend is stopped (it writes a snapshot) and started
 * again: the restart's time and RSS.
 *
 * With retention working, RSS and the snapshot level off after the first cycles instead of
 * growing with every run; `--retention 30d` shows the other case.
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { names } from '../streams/names.js';
import type { Names } from '../streams/names.js';
import { SonarClient } from '../src/client/client.js';
import { startNatsServer } from '../src/dev/nats-server.js';
import { storedSnapshot } from '../src/backend/snapshots/snapshot.js';
import { silentLogger } from '../src/log.js';
import { runFile } from './e2e/phases.js';
import { memoryOf, startBackend, startWorker } from './e2e/procs.js';
import type { Child } from './e2e/procs.js';

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1]!;
};
const opts = {
  cycles: Number(arg('cycles', '10')),
  tasks: Number(arg('tasks', '50000')),
  workers: Number(arg('workers', '4')),
  slots: Number(arg('slots', '16')),
  retention: arg('retention', '5s'),
  inputBytes: Number(arg('input-bytes', '200')),
};
const log = (msg: string) => process.stderr.write(`[memory] ${msg}\n`);

/** Ctrl-C ends the bench at its next wait, with the table of the cycles measured so far. */
let interrupted = false;
process.once('SIGINT', () => {
  interrupted = true;
  log('interrupted: stopping after this wait');
});

interface Row {
  cycle: number;
  submitted: number;
  seconds: number;
  tasksHeld: number;
  workersHeld: number;
  rssMb: number;
  peakMb: number;
  snapshotKiB: number;
  streamMessages: number;
  streamMiB: number;
}

async function main(): Promise<void> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url, noAsyncTraces: true });
  const jsm = await jetstreamManager(nc);
  const prefix = 'benchmem';
  const n = names(prefix);
  const httpPort = await freePort();
  const env = {
    SONAR_NATS_URL: server.url,
    SONAR_PREFIX: prefix,
    SONAR_PULSE_TTL: '5s',
    SONAR_PULSE_INTERVAL: '1s',
    SONAR_RETENTION: opts.retention,
    SONAR_FULL_SWEEP: '2s',
    SONAR_HTTP_PORT: String(httpPort),
  };
  let backend: Child | null = null;
  let workers: Child[] = [];
  const rows: Row[] = [];
  try {
    backend = await startBackend(env);
    const client = new SonarClient(nc, { prefix });
    const pad = 'x'.repeat(opts.inputBytes);
    for (let cycle = 1; cycle <= opts.cycles; cycle++) {
      const t0 = performance.now();
      workers = await Promise.all(
        Array.from({ length: opts.workers }, (_, i) =>
          startWorker(server.url, prefix, opts.slots, `c${cycle}-w${i}`),
        ),
      );
      const runId = `m${cycle}`;
      log(`cycle ${cycle}: ${opts.tasks} tasks`);
      await client.submit(runFile(runId, opts.tasks, { pad }));
      await until(jsm, n, runId, 'RunSucceeded');
      for (const w of workers.splice(0)) await w.stop();
      if (!opts.retention.endsWith('d')) await until(jsm, n, runId, 'RunExpired');
      const seconds = (performance.now() - t0) / 1000;
      const metrics = await scrape(httpPort);
      const snap = await storedSnapshot({ nc, jsm, names: n, log: silentLogger });
      const stream = await jsm.streams.info(n.streams.events);
      const mem = memoryOf(backend.pid);
      const row: Row = {
        cycle,
        submitted: cycle * opts.tasks,
        seconds,
        tasksHeld: sum(metrics, 'sonar_tasks'),
        workersHeld: sum(metrics, 'sonar_workers'),
        rssMb: mem.rssMb,
        peakMb: mem.peakMb,
        snapshotKiB: (snap?.bytes ?? 0) / 1024,
        streamMessages: stream.state.messages,
        streamMiB: stream.state.bytes / 1024 / 1024,
      };
      rows.push(row);
      log(JSON.stringify(row));
    }
    log('restart: stop (writes a snapshot), then start again');
    await backend.stop();
    const snap = await storedSnapshot({ nc, jsm, names: n, log: silentLogger });
    const t0 = performance.now();
    backend = await startBackend(env);
    const restartS = (performance.now() - t0) / 1000;
    await delay(2_000);
    const restartMem = memoryOf(backend.pid);
    printRows(rows);
    console.log('');
    printTable(
      ['after the last cycle', 'result'],
      [
        ['snapshot written on stop', `${((snap?.bytes ?? 0) / 1024).toFixed(0)} KiB`],
        ['restart (start to `backend started`)', `${restartS.toFixed(1)} s`],
        ['backend RSS 2 s after the restart', `${restartMem.rssMb.toFixed(0)} MB`],
      ],
    );
  } catch (err: unknown) {
    if (!interrupted) throw err;
    printRows(rows);
  } finally {
    console.log(
      `\n${rows.length} cycles x ${opts.tasks} tasks, ${opts.workers} workers x ${opts.slots} slots (fresh each cycle), ` +
        `SONAR_RETENTION ${opts.retention}, inputs of ${opts.inputBytes} B`,
    );
    for (const w of workers) await w.stop('SIGKILL');
    await backend?.stop('SIGKILL');
    await nc.close();
    await server.stop();
  }
}

function printRows(rows: Row[]): void {
  printTable(
    [
      'cycle',
      'tasks submitted',
      'cycle s',
      'tasks held',
      'workers held',
      'backend RSS MB',
      'peak RSS MB',
      'snapshot KiB',
      'events stored',
      'stream MiB',
    ],
    rows.map((r) => [
      String(r.cycle),
      String(r.submitted),
      r.seconds.toFixed(0),
      String(r.tasksHeld),
      String(r.workersHeld),
      r.rssMb.toFixed(0),
      r.peakMb.toFixed(0),
      r.snapshotKiB.toFixed(0),
      String(r.streamMessages),
      r.streamMiB.toFixed(1),
    ]),
  );
}

/** Waits until the run subject's last event is `type` (a direct read, cheap to poll). */
async function until(jsm: JetStreamManager, n: Names, runId: string, type: string) {
  for (;;) {
    if (interrupted) throw new Error('interrupted');
    try {
      const m = await jsm.streams.getMessage(n.streams.events, {
        last_by_subj: n.subjects.run(runId),
      });
      if ((m?.json<{ type: string }>().type ?? null) === type) return;
    } catch {
      // No message on the subject yet (or purged, RunExpired not yet appended).
    }
    await delay(200);
  }
}

/** The backend's /metrics, as `name{labels} value` lines. */
async function scrape(port: number): Promise<string[]> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  return (await res.text()).split('\n');
}

/** The sum of a gauge over its labels. */
const sum = (lines: string[], name: string): number =>
  lines
    .filter((l) => l.startsWith(`${name}{`))
    .reduce((acc, l) => acc + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(line(header));
  console.log(`| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`);
  for (const r of rows) console.log(line(r));
}

/** A TCP port free now (for the backend's HTTP endpoint). */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

await main();
