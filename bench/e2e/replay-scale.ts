/**
 * Restart at scale: a stream of ~1M events (runs of 20k tasks, each task's five happy-path
 * events), then backend restarts timed from their own log lines: a full replay, and a
 * snapshot (written by the leader) plus a tail of 50k events.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
import { SNAPSHOT_OBJECT, storedSnapshot } from '../../src/backend/snapshots/snapshot.js';
import { silentLogger } from '../../src/log.js';
import { memoryOf, startBackend } from './procs.js';

const TASKS_PER_RUN = 20_000;
const hash = 'ab'.repeat(32);

/** One run's events in stream order: step, tasks created, submitted, then each lifecycle round. */
function* runEvents(n: Names, runId: string, tasks: number): Generator<[string, object]> {
  const T = (taskId: string) => n.subjects.task(runId, taskId);
  const ids = Array.from({ length: tasks }, (_, i) => `t${i}`);
  yield [
    n.subjects.step(runId, 's'),
    {
      type: 'StepCreated',
      data: { runId, stepId: 's', tags: ['bench'], after: [], taskCount: tasks },
    },
  ];
  for (const [i, taskId] of ids.entries()) {
    yield [
      T(taskId),
      {
        type: 'TaskCreated',
        data: { runId, stepId: 's', taskId, tags: ['bench'], input: { shard: i }, maxAttempts: 3 },
      },
    ];
  }
  yield [
    n.subjects.run(runId),
    { type: 'RunSubmitted', data: { runId, stepIds: ['s'], taskCount: tasks } },
  ];
  const attempt = (taskId: string) => `${runId}-${taskId}-attempt1xx`;
  const rounds: ((taskId: string) => object)[] = [
    (t) => ({
      type: 'TaskPublished',
      data: { attempt: 1, attemptId: attempt(t), tokenHash: hash, tag: 'bench' },
    }),
    (t) => ({
      type: 'TaskStarted',
      data: { attemptId: attempt(t), workerId: 'bench-w0-abcdefghij' },
    }),
    (t) => ({
      type: 'TaskResultAccepted',
      data: {
        attemptId: attempt(t),
        workerId: 'bench-w0-abcdefghij',
        outputRef: 'inline',
        outputBytes: 2,
        outputInline: 'b2s=',
      },
    }),
    (t) => ({ type: 'TaskFinalized', data: { attemptId: attempt(t), resultKey: `${runId}.${t}` } }),
  ];
  for (const round of rounds) for (const taskId of ids) yield [T(taskId), round(taskId)];
  yield [n.subjects.step(runId, 's'), { type: 'StepSucceeded', data: {} }];
  yield [n.subjects.run(runId), { type: 'RunSucceeded', data: {} }];
}

/** Publishes runs until about `events` events are stored; pipelined, one connection (ordered). */
export async function generateForBench(
  nc: NatsConnection,
  n: Names,
  events: number,
  runPrefix: string,
  tasksPerRun = TASKS_PER_RUN,
) {
  const js = jetstream(nc);
  const enc = new TextEncoder();
  const runs = Math.max(1, Math.round(events / (tasksPerRun * 5)));
  let id = 0;
  const inFlight = new Set<Promise<unknown>>();
  for (let r = 0; r < runs; r++) {
    for (const [subject, e] of runEvents(n, `${runPrefix}${r}`, tasksPerRun)) {
      const body = enc.encode(JSON.stringify({ id: `ev${++id}`, v: 1, ...e }));
      const p = js.publish(subject, body);
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
      if (inFlight.size >= 512) await Promise.race(inFlight);
    }
  }
  await Promise.all(inFlight);
}

export interface ReplayScaleResult {
  events: number;
  tasks: number;
  generateMs: number;
  fullReplayMs: number[];
  /** Process start to `backend started` (tsx, connect, provisioning, replay). */
  fullStartMs: number[];
  snapshot: { ms: number; bytes: number; rawBytes: number };
  tail: number;
  snapshotRestartMs: number[];
  /** Of which: reading and decoding the snapshot. */
  snapshotLoadMs: number[];
  snapshotStartMs: number[];
  rssAfterReplayMb: number;
}

async function timedStart(env: Record<string, string>, profDir?: string) {
  const t = performance.now();
  const b = await startBackend(env, profDir);
  const startMs = performance.now() - t;
  const replayed = b.logs('projection replayed')[0];
  const loaded = b.logs('projection snapshot loaded')[0];
  const rebuildMs = Number(replayed?.['ms'] ?? NaN) + Number(loaded?.['ms'] ?? 0);
  return { b, startMs, rebuildMs, replayed, loaded };
}

export async function replayAtScale(
  nc: NatsConnection,
  url: string,
  events: number,
  profDir?: string,
): Promise<ReplayScaleResult> {
  const n = names('bench1m');
  const jsm = await jetstreamManager(nc);
  await ensureTopology(jsm, n, DEFAULT_TOPOLOGY_OPTIONS);
  const t = performance.now();
  await generateForBench(nc, n, events, 'big');
  const generateMs = performance.now() - t;
  const generated = (await jsm.streams.info(n.streams.events)).state.last_seq;
  // Long timings: this backend must not lose its leadership or requeue anything meanwhile.
  const env = { SONAR_NATS_URL: url, SONAR_PREFIX: n.prefix, SONAR_LOG_LEVEL: 'info' };
  const deps = { nc, jsm, names: n, log: silentLogger };

  const full1 = await timedStart(env, profDir);
  await full1.b.stop('SIGKILL');
  const full2 = await timedStart(env);
  const rssAfterReplayMb = memoryOf(full2.b.pid).rssMb;
  // The leader writes its first snapshot at its first check (5 s): 1M events are over 100k.
  const written = await full2.b.waitForLog('projection snapshot written', 120_000);
  await full2.b.stop('SIGKILL'); // no snapshot on stop: the tail below stays a tail
  const before = (await jsm.streams.info(n.streams.events)).state.last_seq;
  await generateForBench(nc, n, 50_000, 'tail', 10_000);
  const tail = (await jsm.streams.info(n.streams.events)).state.last_seq - before;
  const stored = await storedSnapshot(deps);
  if (!stored || stored.seq < generated) throw new Error('no snapshot of the 1M events stored');
  const snap1 = await timedStart(env, profDir);
  await snap1.b.stop('SIGKILL');
  const snap2 = await timedStart(env);
  await snap2.b.stop('SIGKILL');
  for (const s of [snap1, snap2]) {
    if (!s.loaded) throw new Error('the restart did not load the snapshot');
  }
  await (await new Objm(nc).open(n.objectStores.snapshots)).delete(SNAPSHOT_OBJECT);
  return {
    events: generated,
    tasks: Number(full2.replayed?.['tasks'] ?? NaN),
    generateMs,
    fullReplayMs: [full1.rebuildMs, full2.rebuildMs],
    fullStartMs: [full1.startMs, full2.startMs],
    snapshot: {
      ms: Number(written['ms']),
      bytes: Number(written['bytes']),
      rawBytes: Number(written['rawBytes']),
    },
    tail,
    snapshotRestartMs: [snap1.rebuildMs, snap2.rebuildMs],
    snapshotLoadMs: [snap1, snap2].map((s) => Number(s.loaded?.['ms'] ?? NaN)),
    snapshotStartMs: [snap1.startMs, snap2.startMs],
    rssAfterReplayMb,
  };
}
