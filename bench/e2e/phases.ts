/**
 * The measured phases of the end-to-end bench, each against a running backend and workers.
 * Times of starts and finalizations are the server's timestamps of the stored events; the
 * submit time is the bench's clock (same machine).
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';
import { SonarClient } from '../../src/client/client.js';
import type { Child } from './procs.js';
import { memoryOf, startBackend } from './procs.js';
import {
  counterDelta,
  countByType,
  eventsSince,
  lastEventSeq,
  percentile,
  streamCounters,
  taskTimes,
  usage,
} from './measure.js';
import type { Sample } from './measure.js';

export interface Env {
  nc: NatsConnection;
  jsm: JetStreamManager;
  n: Names;
  client: SonarClient;
  sample: () => Promise<Sample>;
}

/** A run of `count` tasks on one step; `tag` defaults to the workers' tag. */
export function runFile(runId: string, count: number, input: object = {}, tag = 'bench') {
  return {
    runId,
    steps: [
      {
        id: 's',
        tags: [tag],
        tasks: Array.from({ length: count }, (_, i) => ({ id: `t${i}`, input: { i, ...input } })),
      },
    ],
  };
}

/** The type of the run's last event (a direct read: polling it costs the server little). */
async function lastRunEvent(env: Env, runId: string): Promise<string | null> {
  try {
    const m = await env.jsm.streams.getMessage(env.n.streams.events, {
      last_by_subj: env.n.subjects.run(runId),
    });
    return m ? (m.json<{ type: string }>().type ?? null) : null;
  } catch {
    return null;
  }
}

async function untilRunSucceeded(env: Env, runId: string): Promise<void> {
  while ((await lastRunEvent(env, runId)) !== 'RunSucceeded') await delay(100);
}

export interface Throughput {
  tasks: number;
  seconds: number;
  tasksPerSec: number;
  startP50: number;
  startP99: number;
  doneP50: number;
  doneP99: number;
  /** Writes per stream, and events per type, in the window. */
  writes: Map<string, number>;
  events: Map<string, number>;
  /** CPU per task by process, server messages per task, cores busy. */
  usage: ReturnType<typeof usage>;
}

/** Submits one run of `count` tasks and waits until all are Succeeded. */
export async function throughput(env: Env, runId: string, count: number): Promise<Throughput> {
  const before = await streamCounters(env.jsm);
  const fromSeq = await lastEventSeq(env.jsm, env.n);
  const s0 = await env.sample();
  const t0 = Date.now();
  await env.client.submit(runFile(runId, count));
  await untilRunSucceeded(env, runId);
  const s1 = await env.sample();
  const after = await streamCounters(env.jsm);
  const all = await eventsSince(env.nc, env.n, fromSeq);
  const { started, finalized } = taskTimes(
    all.filter((r) => r.subject.includes(`.task.${runId}.`)),
  );
  const lastDone = Math.max(...finalized.values());
  const seconds = (lastDone - t0) / 1000;
  const starts = [...started.values()].map((s) => s[0]!.at - t0);
  const dones = [...finalized.values()].map((at) => at - t0);
  return {
    tasks: count,
    seconds,
    tasksPerSec: count / seconds,
    startP50: percentile(starts, 50),
    startP99: percentile(starts, 99),
    doneP50: percentile(dones, 50),
    doneP99: percentile(dones, 99),
    writes: counterDelta(before, after),
    events: countByType(all),
    usage: usage(s0, s1, count),
  };
}

export interface Latency {
  offeredPerSec: number;
  tasks: number;
  startP50: number;
  startP99: number;
  doneP50: number;
  doneP99: number;
}

/** One-task runs submitted open-loop at `perSec`; latency of each from its submit call. */
export async function lightLoad(
  env: Env,
  label: string,
  perSec: number,
  count: number,
): Promise<Latency> {
  const fromSeq = await lastEventSeq(env.jsm, env.n);
  const submittedAt = new Map<string, number>();
  const submits: Promise<unknown>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const wait = t0 + (i * 1000) / perSec - performance.now();
    if (wait > 0) await delay(wait);
    const runId = `${label}${i}`;
    submittedAt.set(`${runId}.t0`, Date.now());
    submits.push(env.client.submit(runFile(runId, 1)));
  }
  await Promise.all(submits);
  let times = taskTimes(await eventsSince(env.nc, env.n, fromSeq));
  while (times.finalized.size < count) {
    await delay(250);
    times = taskTimes(await eventsSince(env.nc, env.n, fromSeq));
  }
  const starts: number[] = [];
  const dones: number[] = [];
  for (const [key, at] of submittedAt) {
    starts.push(times.started.get(key)![0]!.at - at);
    dones.push(times.finalized.get(key)! - at);
  }
  return {
    offeredPerSec: perSec,
    tasks: count,
    startP50: percentile(starts, 50),
    startP99: percentile(starts, 99),
    doneP50: percentile(dones, 50),
    doneP99: percentile(dones, 99),
  };
}

export interface Recovery {
  killed: string;
  tasks: number;
  /** From the SIGKILL to each of its tasks' next TaskStarted on another worker. */
  firstMs: number;
  lastMs: number;
}

/**
 * Holds `hold` tasks (they sleep until cancelled), waits until they have all run for over
 * orphanAge, SIGKILLs `victim` and times until each task it held is Running elsewhere.
 */
export async function recovery(
  env: Env,
  runId: string,
  hold: number,
  victim: Child,
  orphanAgeMs: number,
): Promise<Recovery> {
  const fromSeq = await lastEventSeq(env.jsm, env.n);
  await env.client.submit(runFile(runId, hold, { holdMs: 600_000 }));
  let times = taskTimes(await eventsSince(env.nc, env.n, fromSeq));
  while (times.started.size < hold) {
    await delay(200);
    times = taskTimes(await eventsSince(env.nc, env.n, fromSeq));
  }
  const lastStart = Math.max(...[...times.started.values()].map((s) => s[0]!.at));
  await delay(Math.max(0, lastStart + orphanAgeMs + 500 - Date.now()));
  const held = [...times.started].filter(([, s]) => s[0]!.workerId === victim.name);
  const killedAt = Date.now();
  await victim.stop('SIGKILL');
  const moved = new Map<string, number>();
  while (moved.size < held.length) {
    await delay(100);
    times = taskTimes(await eventsSince(env.nc, env.n, fromSeq));
    for (const [key] of held) {
      const again = times.started.get(key)!.find((s) => s.workerId !== victim.name);
      if (again) moved.set(key, again.at - killedAt);
    }
    if (Date.now() - killedAt > 120_000)
      throw new Error('tasks of the killed worker not recovered');
  }
  await env.client.cancel(runId, { reason: 'bench done' });
  const ms = [...moved.values()];
  return {
    killed: victim.name,
    tasks: held.length,
    firstMs: Math.min(...ms),
    lastMs: Math.max(...ms),
  };
}

/**
 * A fresh backend on its own prefix: submits `count` tasks nobody serves (they stay Pending)
 * and reads its memory once the submit is done and again after the leader's snapshot (it
 * writes one past 100k events), with the peak (VmHWM) over all of it.
 */
export async function memoryAt(nc: NatsConnection, url: string, count: number, prefix: string) {
  const backend = await startBackend({ SONAR_NATS_URL: url, SONAR_PREFIX: prefix });
  try {
    const client = new SonarClient(nc, { prefix });
    const up = memoryOf(backend.pid);
    await client.submit(runFile('idle', count, {}, 'nobody'));
    const submitted = memoryOf(backend.pid);
    await backend.waitForLog('projection snapshot written', 60_000).catch(() => null);
    await delay(2_000);
    return { up, submitted, after: memoryOf(backend.pid) };
  } finally {
    await backend.stop();
  }
}
