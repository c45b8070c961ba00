/**
 * Event store benchmark: prints one table from one run.
 *   npm run bench            (node --expose-gc, tsx)
 * Targets: appends >= 70% of raw publish; replay from the stream >= 100k events/s;
 * pure fold >= 150k events/s; <= 2 KB projection heap per task at 100k tasks.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { applyEvent, createProjection } from '../actors/projection.js';
import type { EventRecord } from '../actors/projection.js';
import { replay, replayRecords } from '../actors/replay.js';
import { EventStore } from '../streams/event-store.js';
import { toJsonlLine } from '../streams/jsonl.js';
import { names } from '../streams/names.js';
import { ensureTopology } from '../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../streams/topology.js';
import { startNatsServer } from '../src/dev/nats-server.js';

const AGGREGATES = 1000;
const ROUNDS = 200; // events per aggregate in the append test (200k events in all)
const HEAP_TASKS = 100_000;
const WINDOW = 512;

const hash = 'ab'.repeat(32);
const T = '2026-01-01T00:00:00.000Z';

/** The five events of a task that succeeds, as the stream holds them. */
function lifecycle(runId: string, taskId: string, i: number): { type: string; data: unknown }[] {
  const attemptId = `a${i}`;
  return [
    {
      type: 'TaskCreated',
      data: { runId, stepId: 's1', taskId, tags: ['linux'], command: ['true'], maxAttempts: 3 },
    },
    { type: 'TaskPublished', data: { attempt: 1, attemptId, tokenHash: hash, tag: 'linux' } },
    { type: 'TaskStarted', data: { attemptId, workerId: 'w1' } },
    {
      type: 'TaskResultAccepted',
      data: {
        attemptId,
        workerId: 'w1',
        outputRef: 'inline',
        outputBytes: 2,
        outputInline: 'aGk=',
      },
    },
    { type: 'TaskFinalized', data: { attemptId, resultKey: `${runId}.${taskId}` } },
  ];
}

/** A long valid chain per aggregate: created, then publish/requeue pairs (all accepted). */
function chainEvent(i: number, round: number): { type: string; data: unknown } {
  if (round === 0) return lifecycle('r1', `t${i}`, i)[0]!;
  const attempt = Math.ceil(round / 2);
  const attemptId = `a${i}x${attempt}`;
  return round % 2 === 1
    ? { type: 'TaskPublished', data: { attempt, attemptId, tokenHash: hash, tag: 'linux' } }
    : { type: 'TaskRequeued', data: { attemptId, reason: 'publish-timeout', recoveries: 0 } };
}

async function main(): Promise<void> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url, noAsyncTraces: true });
  try {
    const n = names('bench');
    await ensureTopology(await jetstreamManager(nc), n, DEFAULT_TOPOLOGY_OPTIONS);
    const js = jetstream(nc);
    const store = new EventStore(nc, n);
    const total = AGGREGATES * ROUNDS;
    const payload = new TextEncoder().encode(
      JSON.stringify({
        id: 'x'.repeat(22),
        type: 'TaskPublished',
        v: 1,
        data: lifecycle('r', 't', 0)[1]!.data,
      }),
    );

    // 1. Raw async publish into a stream like the events one: same count, same window, no
    //    expectations, no msg id.
    const jsm = await jetstreamManager(nc);
    const eventsConfig = (await jsm.streams.info(n.streams.events)).config;
    await jsm.streams.add({ ...eventsConfig, name: 'BENCH_RAW', subjects: ['bench.raw.>'] });
    let t = performance.now();
    await pipeline(total, (i) => js.publish(`bench.raw.${i % AGGREGATES}`, payload).then(() => {}));
    const raw = total / ((performance.now() - t) / 1000);
    await jsm.streams.delete('BENCH_RAW');

    // 2. Optimistic-concurrency appends over 1000 aggregates: each aggregate's chain is
    //    sequential (expected last subject sequence), the aggregates run side by side.
    const seqs = new Array<number>(AGGREGATES).fill(0);
    t = performance.now();
    let id = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const items = seqs.map((expectedSeq, i) => {
        const e = chainEvent(i, round);
        return {
          subject: n.subjects.task('r1', `t${i}`),
          event: { id: `e${++id}`, ...e },
          expectedSeq,
        };
      });
      const results = await store.appendMany(items, WINDOW);
      results.forEach((r, i) => {
        if (r.status === 'rejected') throw r.reason;
        seqs[i] = r.value.seq;
      });
    }
    const appends = total / ((performance.now() - t) / 1000);

    // 3. Replay from the stream, including the fold (ordered consumer -> applyEvent).
    t = performance.now();
    const p = createProjection();
    let folded = 0;
    await store.replay((r) => {
      if (!applyEvent(p, r).ok) throw new Error(`replay refused seq ${r.seq}`);
      folded++;
    });
    const replayRate = folded / ((performance.now() - t) / 1000);

    // 4. The pure fold: 100k tasks x 5 events of decoded records (what the projection loop
    //    folds: decode, validate, transition, index), then the same from JSONL text lines.
    const records: EventRecord[] = [];
    let seq = 0;
    for (let i = 0; i < HEAP_TASKS; i++) {
      for (const e of lifecycle('r2', `t${i}`, i)) {
        records.push({ seq: ++seq, subject: n.subjects.task('r2', `t${i}`), time: T, ...e });
      }
    }
    gc();
    const before = process.memoryUsage().heapUsed;
    t = performance.now();
    const { projection, skipped } = replayRecords(records);
    const foldRate = records.length / ((performance.now() - t) / 1000);
    if (skipped.length > 0)
      throw new Error(`fold skipped ${skipped.length}: ${skipped[0]?.reason}`);
    gc();
    // The input records are still alive here, so the difference is the projection alone.
    const heapPerTask = (process.memoryUsage().heapUsed - before) / projection.tasks.size;
    const lines = records.map(toJsonlLine);
    records.length = 0;
    gc();
    t = performance.now();
    replay(lines);
    const lineRate = lines.length / ((performance.now() - t) / 1000);

    const rows: [string, string, string, string][] = [
      ['raw async publish', fmt(raw, 'msgs/s'), '', ''],
      [
        'OCC appends, 1000 aggregates',
        fmt(appends, 'events/s'),
        `${pct(appends / raw)} of raw`,
        `>= 70% ${mark(appends / raw >= 0.7)}`,
      ],
      [
        'replay from stream + fold',
        fmt(replayRate, 'events/s'),
        `${folded} events`,
        `>= 100k/s ${mark(replayRate >= 100_000)}`,
      ],
      [
        'pure fold (decoded records)',
        fmt(foldRate, 'events/s'),
        `${seq} events`,
        `>= 150k/s ${mark(foldRate >= 150_000)}`,
      ],
      ['fold from JSONL text lines', fmt(lineRate, 'events/s'), 'JSON.parse included', ''],
      [
        'projection heap per task',
        `${Math.round(heapPerTask)} B`,
        `${projection.tasks.size} tasks`,
        `<= 2048 B ${mark(heapPerTask <= 2048)}`,
      ],
    ];
    printTable(['measure', 'result', 'note', 'target'], rows);
  } finally {
    await nc.close();
    await server.stop();
  }
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (!g) throw new Error('run with node --expose-gc (npm run bench does)');
  g();
  g();
}

async function pipeline(count: number, op: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) await op(next++);
  };
  await Promise.all(Array.from({ length: WINDOW }, lane));
}

const fmt = (v: number, unit: string) => `${Math.round(v).toLocaleString('en-US')} ${unit}`;
const pct = (v: number) => `${Math.round(v * 100)}%`;
const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');

function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(line(head));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
}

await main();
