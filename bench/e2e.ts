/**
 * End-to-end benchmark: prints tables (or `--json`) from one run.
 *   npm run bench:e2e [-- --workers 4 --slots 16 --tasks 20000 --rounds 2 --events 1000000]
 *                       [--backends 1]
 *
 * One process tree on this machine: a nats-server with file storage (child), one backend
 * (child: `bin/sonar.js backend` with its shebang's node flags; orphanAge 5 s, pulse TTL 5 s,
 * pulse every 1 s, everything else default), W SDK worker processes x S slots whose handler
 * returns 2 bytes (inline output), and this process as the client. Each measurement runs
 * `--rounds` times. Then, without workers: fresh backends holding 100k Pending tasks
 * (memory), and restarts on a stream of `--events` events (full replay, snapshot + tail).
 *
 * Targets: throughput >= 60% of the ceiling (raw async publish in this run / JetStream writes
 * per task); <= 8 writes per task on the default path; submit-to-start p50 <= 20 ms at
 * 50 tasks/s; backend RSS < 300 MB at 100k tasks; restart rebuild < 10 s at 1M events.
 * `--backends K` runs K backends: the first leads (it is elected before the others start),
 * and the CPU table shows each, so what a follower takes off the leader shows.
 * `--prof DIR` writes CPU profiles of the backends and workers there. `--throughput-only` runs
 * the raw publish and throughput rounds alone (message counts by kind, quickly).
 */
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { names } from '../streams/names.js';
import { SonarClient } from '../src/client/client.js';
import { startNatsServer } from '../src/dev/nats-server.js';
import { rawPublishRate, sampler } from './e2e/measure.js';
import { lightLoad, memoryAt, recovery, throughput } from './e2e/phases.js';
import type { Env } from './e2e/phases.js';
import { startBackend, startWorker } from './e2e/procs.js';
import type { Child } from './e2e/procs.js';
import { replayAtScale } from './e2e/replay-scale.js';
import { costTable, kindTable, mainRows, printTable } from './e2e/report.js';
import { countTraffic } from './e2e/traffic.js';
import type { TrafficCounter } from './e2e/traffic.js';
import type { E2eResult } from './e2e/report.js';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const opts = {
  workers: arg('workers', 4),
  backends: arg('backends', 1),
  slots: arg('slots', 16),
  tasks: arg('tasks', 20_000),
  rounds: arg('rounds', 2),
  events: arg('events', 1_000_000),
  json: process.argv.includes('--json'),
  throughputOnly: process.argv.includes('--throughput-only'),
  prof: (() => {
    const i = process.argv.indexOf('--prof');
    return i === -1 ? undefined : process.argv[i + 1];
  })(),
};
const ORPHAN_AGE_MS = 5_000;
/** Tasks of the run that counts messages by kind (exact counts: no need for more). */
const TRAFFIC_TASKS = 4_000;
const trafficTasks = Math.min(opts.tasks, TRAFFIC_TASKS);
const log = (msg: string) => {
  if (!opts.json) process.stderr.write(`[e2e] ${msg}\n`);
};

async function main(): Promise<void> {
  if (opts.prof) mkdirSync(opts.prof, { recursive: true });
  const monitorPort = await freePort();
  const server = await startNatsServer({ args: ['-m', String(monitorPort)] });
  const nc = await connect({ servers: server.url, noAsyncTraces: true });
  const children: Child[] = [];
  // Only for the run that counts messages by kind: a subscription on `>` doubles what
  // nats-server delivers, and its CPU and the bench's would count as the tree's.
  let traffic: TrafficCounter | undefined;
  try {
    const prefix = 'bench';
    const n = names(prefix);
    const backendEnv = {
      SONAR_NATS_URL: server.url,
      SONAR_PREFIX: prefix,
      SONAR_ORPHAN_AGE: `${ORPHAN_AGE_MS}ms`,
      SONAR_PULSE_TTL: '5s',
      SONAR_PULSE_INTERVAL: '1s',
    };
    const backend = await startBackend(backendEnv, opts.prof);
    children.push(backend);
    await backend.waitForLog('reconciler elected');
    const followers: Child[] = [];
    for (let i = 2; i <= opts.backends; i++) {
      followers.push(await startBackend(backendEnv, opts.prof, `backend ${i}`));
    }
    children.push(...followers);
    const workers = await Promise.all(
      Array.from({ length: opts.workers }, (_, i) =>
        startWorker(server.url, prefix, opts.slots, `bench-w${i}`, opts.prof),
      ),
    );
    children.push(...workers);
    const jsm = await jetstreamManager(nc);
    const pids = () => ({
      'nats-server': server.pid,
      backend: backend.pid,
      ...Object.fromEntries(followers.map((b) => [b.name, b.pid])),
      bench: process.pid,
      ...Object.fromEntries(
        workers.filter((w) => w.running).map((w) => [`worker ${w.name}`, w.pid]),
      ),
    });
    const env: Env = {
      nc,
      jsm,
      n,
      client: new SonarClient(nc, { prefix }),
      sample: sampler(pids, `http://127.0.0.1:${monitorPort}`, () => traffic),
    };
    const result: E2eResult = {
      machine: { cpus: (await import('node:os')).cpus().length, node: process.version },
      setup: opts,
      rawPublish: [],
      throughput: [],
      traffic: null,
      light: [],
      recovery: [],
      memory: [],
      replay: null,
    };

    log('raw publish');
    result.rawPublish.push(await rawPublishRate(nc, jsm, n, env.sample));
    log('warm-up');
    await throughput(env, 'warmup', 2_000);
    for (let r = 0; r < opts.rounds; r++) {
      log(`throughput round ${r + 1}`);
      result.throughput.push(await throughput(env, `tp${r}`, opts.tasks));
      result.rawPublish.push(await rawPublishRate(nc, jsm, n, env.sample));
    }
    log('messages by kind');
    traffic = await countTraffic(server.url, prefix, connect);
    result.traffic = await throughput(env, 'traffic', trafficTasks);
    await traffic.stop();
    traffic = undefined;
    for (let r = 0; r < (opts.throughputOnly ? 0 : opts.rounds); r++) {
      log(`light load round ${r + 1}`);
      result.light.push(await lightLoad(env, `lat${r}x`, 50, 300));
    }
    const recoveries = opts.throughputOnly ? 0 : Math.min(opts.rounds, opts.workers - 1);
    for (let r = 0; r < recoveries; r++) {
      log(`recovery round ${r + 1}`);
      const live = opts.workers - r;
      result.recovery.push(
        await recovery(env, `hold${r}`, (live * opts.slots) / 2, workers[r]!, ORPHAN_AGE_MS),
      );
    }
    for (const c of children.splice(0).reverse()) await c.stop();
    for (let r = 0; r < (opts.throughputOnly ? 0 : opts.rounds); r++) {
      log(`memory at 100k tasks, round ${r + 1}`);
      result.memory.push(await memoryAt(nc, server.url, 100_000, `benchmem${r}`));
    }
    if (opts.events > 0 && !opts.throughputOnly) {
      log(`replay at ${opts.events} events`);
      result.replay = await replayAtScale(nc, server.url, opts.events, opts.prof);
    }
    if (opts.json) console.log(JSON.stringify(result, replacer, 2));
    else {
      printTable(['measure', 'result (range over rounds)', 'target'], mainRows(result));
      console.log('');
      printTable(['JetStream write', 'stream', 'per task'], costTable(result.throughput, prefix));
      console.log('');
      printTable(
        [`nats-server messages by kind (a run of ${trafficTasks} tasks)`, 'in + out per task'],
        kindTable(result.traffic ? [result.traffic] : []),
      );
    }
  } finally {
    for (const c of children.reverse()) await c.stop('SIGKILL');
    await traffic?.stop();
    await nc.close();
    await server.stop();
  }
}

/** A TCP port free now (for nats-server's monitoring endpoint). */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/** Maps print as objects in `--json`. */
const replacer = (_k: string, v: unknown): unknown =>
  v instanceof Map ? (Object.fromEntries(v) as unknown) : v;

await main();
