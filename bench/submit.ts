/**
 * Submit benchmark: prints one table from one run.
 *   npm run bench:submit
 * Measures TaskCreated/s when a client submits a 20k-task run through the API (validation,
 * hash, begin, 20 chunks of 1,000, commit; the backend judges every event with the machine,
 * appends it with optimistic concurrency and a msg id, and its projection loop folds it)
 * against raw JetStream publish of the same TaskCreated payloads in the same run.
 * Target: submit >= 60% of raw.
 *
 * Backends run in child processes of their own (API handlers only: no reconciler or
 * finalizers appending meanwhile), the client and the raw publisher here, as `sonar backend`
 * and `sonar submit` run. Two backends are measured: one whose NATS connection has
 * `noAsyncTraces` (no Error with a stack captured per request: a publish each event) and one
 * with the client's defaults, as `Backend.start` connects today.
 *
 * Each round runs raw, then both submits; the machine is shared, so each round's submit is
 * compared with that round's raw (paired ratio) and the medians are reported.
 * `BENCH_PROF=<dir>` writes a CPU profile of each backend there.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Backend } from '../src/backend/backend.js';
import { apiHandlers } from '../src/backend/api/handlers/index.js';
import { SonarClient } from '../src/client/client.js';
import { loadConfig } from '../src/config.js';
import { startNatsServer } from '../src/dev/nats-server.js';
import { silentLogger } from '../src/log.js';
import { connectNats } from '../src/nats.js';
import type { RunFile } from '../src/protocol.js';
import { createOutputStore } from '../src/storage/create-output-store.js';
import { encodeEnvelope } from '../streams/envelope.js';

const TASKS = 20_000;
const ROUNDS = 5;
const WINDOW = 512;

/** A realistic run file: two steps, each task with a command and a small input. */
function runFile(runId: string, tasks = TASKS): RunFile {
  const half = tasks / 2;
  const make = (from: number) =>
    Array.from({ length: half }, (_, i) => ({
      id: `t${from + i}`,
      command: ['scan', '--target', `host-${from + i}.example.com`],
      input: { shard: from + i, retries: 2 },
    }));
  return {
    runId,
    steps: [
      { id: 'crawl', tags: ['linux'], tasks: make(0) },
      { id: 'parse', tags: ['linux'], after: ['crawl'], tasks: make(half) },
    ],
  };
}

/** `--backend <url> <prefix> <traces|notraces>`: a child process serving the API. */
async function serveBackend(url: string, prefix: string, traces: string): Promise<void> {
  // Its runs are never worked: every round's tasks stay open, past the default admission limit.
  const config = loadConfig({
    SONAR_NATS_URL: url,
    SONAR_PREFIX: prefix,
    SONAR_MAX_OPEN_TASKS: '100000000',
  });
  const nc = await connectNats(config, { noAsyncTraces: traces === 'notraces' });
  const backend = await Backend.start({
    config,
    nc,
    log: silentLogger,
    parts: { handlers: apiHandlers, components: [], outputs: createOutputStore },
  });
  process.stdout.write('ready\n');
  await once(process, 'SIGTERM');
  await backend.stop();
  await nc.close();
}

async function startBackend(url: string, prefix: string, traces: string): Promise<ChildProcess> {
  const prof = process.env['BENCH_PROF'];
  const child = spawn(
    process.execPath,
    [
      ...process.execArgv,
      ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : []),
      fileURLToPath(import.meta.url),
      '--backend',
      url,
      prefix,
      traces,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const [ready] = (await once(child.stdout, 'data')) as [Buffer];
  if (!ready.toString().includes('ready')) throw new Error(`backend: ${ready.toString()}`);
  return child;
}

async function main(): Promise<void> {
  const server = await startNatsServer();
  const variants = [
    { label: 'submit, backend noAsyncTraces', prefix: 'bench', traces: 'notraces' },
    { label: 'submit, backend default conn.', prefix: 'benchd', traces: 'traces' },
  ];
  const children = await Promise.all(
    variants.map((v) => startBackend(server.url, v.prefix, v.traces)),
  );
  const nc = await connect({ servers: server.url });
  try {
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const eventsConfig = (await jsm.streams.info('BENCH_EVENTS')).config;
    const clients = variants.map((v) => new SonarClient(nc, { prefix: v.prefix }));
    // Warm-up, not measured: JIT and first use on every side (a cold first round runs at
    // about half speed).
    for (const c of clients) await c.submit(runFile('warmup', 2_000));
    const raws: number[] = [];
    const rates: number[][] = variants.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      const runId = `run${round}`;
      const file = runFile(runId);
      // Raw: the same TaskCreated envelopes, one subject per task, the same window, into a
      // stream configured like the events stream; no judging, no expectation, no msg id.
      const payloads = file.steps.flatMap((s) =>
        s.tasks.map((t) =>
          encodeEnvelope({
            id: `create.${runId}.${t.id}`,
            type: 'TaskCreated',
            data: { runId, stepId: s.id, taskId: t.id, tags: s.tags, ...t, maxAttempts: 3 },
          }),
        ),
      );
      const stream = `BENCH_RAW_${round}`;
      await jsm.streams.add({ ...eventsConfig, name: stream, subjects: [`braw${round}.>`] });
      let t = performance.now();
      await pipeline(payloads.length, (i) =>
        js.publish(`braw${round}.t${i}`, payloads[i]).then(() => {}),
      );
      raws.push(payloads.length / ((performance.now() - t) / 1000));
      await jsm.streams.delete(stream);

      for (const [i, client] of clients.entries()) {
        t = performance.now();
        const done = await client.submit(file);
        if (done.taskCount !== TASKS) throw new Error(`submitted ${done.taskCount} tasks`);
        rates[i]!.push(done.taskCount / ((performance.now() - t) / 1000));
      }
    }
    const rows = [
      [
        'raw publish (TaskCreated payloads)',
        fmt(median(raws), 'msgs/s'),
        raws.map(k).join(' '),
        '',
        '',
      ],
    ];
    variants.forEach((v, i) => {
      const ratios = rates[i]!.map((r, j) => r / raws[j]!);
      const ratio = median(ratios);
      rows.push([
        `${v.label} (${TASKS / 1000}k tasks)`,
        fmt(median(rates[i]!), 'TaskCreated/s'),
        rates[i]!.map(k).join(' '),
        ratios.map(pct).join(' '),
        `>= 60%: ${pct(ratio)} ${ratio >= 0.6 ? 'ok' : 'MISSED'}`,
      ]);
    });
    printTable(['measure', 'median', 'rounds', 'of raw, per round', 'target (median)'], rows);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => once(c, 'exit')));
    await nc.close();
    await server.stop();
  }
}

async function pipeline(count: number, op: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) await op(next++);
  };
  await Promise.all(Array.from({ length: WINDOW }, lane));
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (v: number, unit: string) => `${Math.round(v).toLocaleString('en-US')} ${unit}`;
const k = (v: number) => `${(v / 1000).toFixed(1)}k`;
const pct = (v: number) => `${Math.round(v * 100)}%`;

function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

if (process.argv[2] === '--backend') {
  await serveBackend(process.argv[3]!, process.argv[4]!, process.argv[5]!);
} else {
  await main();
}
