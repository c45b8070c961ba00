/**
 * Reconciler plan benchmark: prints one table from one run.
 *   npm run bench:plan
 * One projection with 1,000 workers over 50 tags and 10k tasks in flight (8k Running, 2k
 * Published), then 1k, 10k and 100k Pending tasks. Each row times `plan()` (and `progress()`)
 * on that state, median and worst of a few runs: the tick's cost, since plan is pure and
 * leaves the projection as it found it. Then the same with priorities and delays in use, and
 * then with rate limits on 15 of the tags as well (RATES: buckets with tokens, short
 * windows, and buckets kept empty by the publishes in flight).
 * Target: plan <= 50 ms at 100k Pending, growing no faster than linearly.
 *
 * Then submit-to-start latency on an idle fleet: a real nats-server, one backend with the
 * default parts (API, reconciler, finalizers) and one SDK worker; single-task runs submitted
 * one after another; latency = TaskStarted minus RunSubmitted (server timestamps).
 * Target: p50 <= 20 ms.
 */
import { connect } from '@nats-io/transport-node';
import { progress } from '../actors/reconciler/progress.js';
import { resolvePlanConfig } from '../actors/reconciler/config.js';
import type { PlanConfig } from '../actors/reconciler/config.js';
import { parseTagRates } from '../actors/reconciler/tag-rates.js';
import { plan } from '../actors/reconciler/plan.js';
import type { LiveWorker } from '../actors/reconciler/fleet.js';
import { Backend } from '../src/backend/backend.js';
import { defaultParts } from '../src/default-parts.js';
import { SonarClient } from '../src/client/client.js';
import { loadConfig } from '../src/config.js';
import { silentLogger } from '../src/log.js';
import { createWorker } from '../src/worker/worker.js';
import { T0, at } from '../test/helpers/event-builders.js';
import { startNatsServer } from '../test/helpers/nats-server.js';
import { World } from '../test/helpers/reconciler-world.js';

const WORKERS = 1_000;
const TAGS = 50;
const SLOTS = 12;
const IN_FLIGHT = 10_000;
const RUNNING = 8_000;
const STEPS_PER_RUN = 10;
const PENDING = [1_000, 10_000, 100_000];
const PENDING_BIG = 100_000;
const BIG_STEPS = 4;
const REPEATS = 15;

const tag = (i: number): string => `tag${String(i % TAGS).padStart(2, '0')}`;
const workerTags = (i: number): string[] => [...new Set([tag(i), tag(i * 7 + 3)])].sort();

const LATENCY_RUNS = 200;

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * q))]!;
}
const median = (xs: number[]): number => quantile(xs, 0.5);

function table(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  console.log(fmt(header));
  console.log(widths.map((x) => '-'.repeat(x)).join('  '));
  for (const r of rows) console.log(fmt(r));
}

/**
 * The plan rows for one shape of Pending work. `placement`: each run's steps at priorities -1
 * to 2, a tenth of the tasks with a priority of their own, a fifth delayed past `now` (their
 * own notBefore), and one run in five held back whole by its steps' delay.
 */
function planRows(placement: boolean, config: PlanConfig): string[][] {
  const w = busyWorld();
  const rows: string[][] = [];
  let pending = 0;
  let runs = 0;
  for (const target of PENDING) {
    // Add Pending work in runs of 10 steps over the tags until `target` tasks wait.
    while (pending < target) {
      const perStep = Math.min(1_000, Math.ceil((target - pending) / STEPS_PER_RUN));
      const r = runs;
      w.run(
        `r${r}`,
        Array.from({ length: STEPS_PER_RUN }, (_, s) => ({
          id: `s${s}`,
          tasks: perStep,
          tags: [tag(r * STEPS_PER_RUN + s)],
          ...(placement && {
            priority: ((r + s) % 4) - 1,
            ...(r % 5 === 4 && { delayMs: 3_600_000 }),
            taskOwn: (i: number) => ({
              ...(i % 10 === 3 && { priority: 3 }),
              ...(i % 5 === 1 && { notBefore: at(3_600) }),
            }),
          }),
        })),
        { time: T0 },
      );
      runs++;
      pending += perStep * STEPS_PER_RUN;
    }
    rows.push(timedRow(w, config, placement));
  }
  return rows;
}

/**
 * The rows for big steps: `PENDING_BIG` Pending tasks in one step, then the same over
 * `BIG_STEPS` steps, each step's tasks at three priorities (a third at 2, a third at 1, a third
 * at their step's 0) and two fifths delayed: the first quarter in creation order (the worst case
 * for a reader in creation order), and a fifth of the rest, scattered, with as many again due.
 */
function bigStepRows(config: PlanConfig): string[][] {
  const rows: string[][] = [];
  for (const steps of [1, BIG_STEPS]) {
    const w = busyWorld();
    const perStep = PENDING_BIG / steps;
    w.run(
      'big',
      Array.from({ length: steps }, (_, s) => ({
        id: `s${s}`,
        tasks: perStep,
        tags: [tag(s)],
        taskOwn: (i: number) => ({
          ...(i % 3 !== 2 && { priority: 2 - (i % 3) }),
          ...(i < perStep / 4
            ? { notBefore: at(3_600) }
            : i % 5 === 1
              ? { notBefore: at(600 + (i % 97)) }
              : i % 5 === 2
                ? { notBefore: at(30 - (i % 7)) }
                : {}),
        }),
      })),
      { time: T0 },
    );
    rows.push([String(steps), ...timedRow(w, config, true)]);
  }
  return rows;
}

/** 1,000 workers and 10k tasks in flight on them, spread over every tag. */
function busyWorld(): World {
  const w = new World();
  for (let i = 0; i < WORKERS; i++) w.worker(`w${i}`, workerTags(i), SLOTS);

  // 10k tasks in flight, spread over every tag, on workers advertising their tag.
  w.run(
    'busy',
    Array.from({ length: TAGS }, (_, s) => ({
      id: `s${s}`,
      tasks: IN_FLIGHT / TAGS,
      tags: [tag(s)],
    })),
  );
  let n = 0;
  for (let s = 0; s < TAGS; s++) {
    const workers = Array.from({ length: WORKERS }, (_, i) => i).filter((i) =>
      workerTags(i).includes(tag(s)),
    );
    for (let i = 0; i < IN_FLIGHT / TAGS; i++, n++) {
      const key = `busy.s${s}-${i}`;
      if (n % 5 === 4) w.publish(key, tag(s));
      else w.start(key, `w${workers[i % workers.length]!}`, tag(s));
    }
  }
  if (w.p.tasksByState.Running.size !== RUNNING) throw new Error('bench setup: running count');
  return w;
}

/** One row: `plan()` and `progress()` timed on `w` as it stands (plan leaves it unchanged). */
function timedRow(w: World, config: PlanConfig, placement: boolean): string[] {
  const planMs: number[] = [];
  const progressMs: number[] = [];
  let placed = 0;
  let delayed = 0;
  let limited = 0;
  for (let r = 0; r < 3; r++) plan(w.p, live, now, config); // JIT warm-up, not measured
  for (let r = 0; r < REPEATS; r++) {
    const t0 = performance.now();
    const d = plan(w.p, live, now, config);
    const t1 = performance.now();
    progress(w.p);
    const t2 = performance.now();
    planMs.push(t1 - t0);
    progressMs.push(t2 - t1);
    placed = d.publish.length;
    delayed = Object.values(d.delayed ?? {}).reduce((a, b) => a + b, 0);
    limited = Object.values(d.rateLimited ?? {}).filter((r) => r.left === 0).length;
  }
  return [
    String(w.p.tasksByState.Pending.size),
    ...(placement ? [String(delayed)] : []),
    String(w.p.tasksByState.Published.size + w.p.tasksByState.Running.size),
    String(w.p.activeSteps.size),
    String(placed),
    ...(config.tagRates ? [String(limited)] : []),
    median(planMs).toFixed(2),
    Math.max(...planMs).toFixed(2),
    median(progressMs).toFixed(2),
  ];
}

const now = Date.parse(at(60));
const live: LiveWorker[] = Array.from({ length: WORKERS }, (_, i) => ({
  workerId: `w${i}`,
  tags: workerTags(i),
  slots: SLOTS,
  active: true,
  pulseAt: at(59),
}));
/**
 * Rate limits on 15 of the 50 tags, each holding 200 tasks in flight published 60 s before
 * `now`: five with tokens to spare (1000/h: 800 left), five whose window is long past those
 * publishes (20/s: the whole burst), five that those publishes keep empty (150/h: 0 left).
 */
const RATES = Array.from({ length: 15 }, (_, i) => {
  const rate = i < 5 ? '1000/h' : i < 10 ? '20/s' : '150/h';
  return `${tag(i)}=${rate}`;
}).join(',');
const config = resolvePlanConfig();
const COLUMNS = ['in flight', 'active steps', 'placed/tick', 'plan p50 ms', 'plan max ms'];

console.log(`plan tick: ${WORKERS} workers over ${TAGS} tags (${SLOTS} slots each)`);
// `--big`: only the big-step rows, for a quick look at them.
const bigOnly = process.argv.includes('--big');
if (!bigOnly) {
  table(['pending', ...COLUMNS, 'progress p50 ms'], planRows(false, config));
  console.log(
    '\nwith priorities (-1 to 3, a tenth of tasks their own) and delays (a fifth, and whole runs)',
  );
  table(['pending', 'delayed', ...COLUMNS, 'progress p50 ms'], planRows(true, config));
  console.log(
    '\nwith priorities, delays and rate limits on 15 tags (5 x 1000/h, 5 x 20/s, 5 x 150/h)',
  );
  const rated = resolvePlanConfig({ tagRates: parseTagRates(RATES) });
  const RATED_COLUMNS = [...COLUMNS.slice(0, 3), 'tags out of tokens', ...COLUMNS.slice(3)];
  table(['pending', 'delayed', ...RATED_COLUMNS, 'progress p50 ms'], planRows(true, rated));
}
console.log(
  `\n${PENDING_BIG / 1_000}k Pending in big steps: priorities 2, 1 and the step's 0 (a third each), ` +
    'two fifths delayed (the first quarter of each step, and scattered), a tenth due',
);
table(['steps', 'pending', 'delayed', ...COLUMNS, 'progress p50 ms'], bigStepRows(config));

/** Submit-to-start on an idle fleet: one backend, one worker, runs submitted one by one. */
async function submitToStart(): Promise<number[]> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const config = loadConfig({ SONAR_NATS_URL: server.url, SONAR_PREFIX: 'bench' });
  const backend = await Backend.start({ config, parts: defaultParts, nc, log: silentLogger });
  const worker = createWorker({
    tags: ['linux'],
    slots: 4,
    nc,
    prefix: 'bench',
    handler: () => 'ok',
  });
  await worker.start();
  const client = new SonarClient(nc, { prefix: 'bench' });
  const p = backend.ctx.loop.projection;
  const started = (key: string) => {
    const v = p.tasks.get(key)?.snapshot.value;
    return v !== undefined && v !== 'Pending' && v !== 'Published';
  };
  const latencies: number[] = [];
  try {
    for (let i = -5; i < LATENCY_RUNS; i++) {
      const runId = `lat${i + 5}`;
      await client.submit({ runId, steps: [{ id: 's1', tags: ['linux'], tasks: [{ id: 't0' }] }] });
      // Warm-up runs wait for the first tick to see the worker; the rest should not need one.
      const deadline = performance.now() + 5_000;
      while (!started(`${runId}.t0`) && performance.now() < deadline) {
        await new Promise((r) => setTimeout(r, 1));
      }
      if (i < 0) continue;
      const n = backend.ctx.names.subjects;
      const [submitted] = await backend.ctx.store.readAggregate(n.run(runId));
      const events = await backend.ctx.store.readAggregate(n.task(runId, 't0'));
      const start = events.find((e) => e.type === 'TaskStarted');
      if (!submitted || !start) throw new Error(`${runId}: not started`);
      latencies.push(Date.parse(start.time) - Date.parse(submitted.time));
    }
  } finally {
    await worker.drain().catch(() => {});
    await backend.stop();
    await nc.close();
    await server.stop();
  }
  return latencies;
}

if (!bigOnly) {
  const latencies = await submitToStart();
  console.log(
    `\nsubmit-to-start on an idle fleet (1 backend, 1 worker, ${LATENCY_RUNS} runs, server time)`,
  );
  table(
    ['runs', 'p50 ms', 'p99 ms', 'max ms'],
    [
      [
        String(latencies.length),
        String(quantile(latencies, 0.5)),
        String(quantile(latencies, 0.99)),
        String(Math.max(...latencies)),
      ],
    ],
  );
}
