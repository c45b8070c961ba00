/**
 * What the end-to-end bench reads back from the server: stream counters (every write, by
 * stream), the events of a window (by type, and per-task times), and raw publish speed.
 */
import { jetstream } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { EventRecord } from '../../actors/projection.js';
import { EventStore } from '../../streams/event-store.js';
import type { Names } from '../../streams/names.js';
import { cpuSecondsOf } from './procs.js';
import { trafficDelta } from './traffic.js';
import type { TrafficCounter } from './traffic.js';

/** Messages ever stored per stream (last_seq: work-queue streams delete, but keep counting). */
export async function streamCounters(jsm: JetStreamManager): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for await (const s of jsm.streams.list()) out.set(s.config.name, s.state.last_seq);
  return out;
}

export function counterDelta(
  before: Map<string, number>,
  after: Map<string, number>,
): Map<string, number> {
  const d = new Map<string, number>();
  for (const [name, n] of after) {
    const delta = n - (before.get(name) ?? 0);
    if (delta > 0) d.set(name, delta);
  }
  return d;
}

/** Every event stored after sequence `afterSeq`, as the stream holds them now. */
export async function eventsSince(
  nc: NatsConnection,
  n: Names,
  afterSeq: number,
): Promise<EventRecord[]> {
  const out: EventRecord[] = [];
  await new EventStore(nc, n).replay((r) => void out.push(r), { fromSeq: afterSeq + 1 });
  return out;
}

export async function lastEventSeq(jsm: JetStreamManager, n: Names): Promise<number> {
  return (await jsm.streams.info(n.streams.events)).state.last_seq;
}

/** Per task key (`<runId>.<taskId>`): the server times of its first start and its finalization. */
export function taskTimes(records: EventRecord[]) {
  const started = new Map<string, { at: number; workerId: string; attemptId: string }[]>();
  const finalized = new Map<string, number>();
  for (const r of records) {
    if (r.type !== 'TaskStarted' && r.type !== 'TaskFinalized') continue;
    const key = r.subject.split('.').slice(-2).join('.');
    const data = r.data as { workerId?: string; attemptId: string };
    if (r.type === 'TaskFinalized') finalized.set(key, Date.parse(r.time));
    else {
      const list = started.get(key) ?? [];
      list.push({
        at: Date.parse(r.time),
        workerId: data.workerId ?? '',
        attemptId: data.attemptId,
      });
      started.set(key, list);
    }
  }
  return { started, finalized };
}

export function countByType(records: EventRecord[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of records) m.set(String(r.type), (m.get(String(r.type)) ?? 0) + 1);
  return m;
}

export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/**
 * Raw async publish (acked, pipelined, window 512) of `count` event-sized messages into a
 * scratch stream configured like the events stream: the server's write speed in this run.
 */
export async function rawPublishRate(
  nc: NatsConnection,
  jsm: JetStreamManager,
  n: Names,
  sample: () => Promise<Sample>,
  count = 50_000,
): Promise<{ rate: number; usage: ReturnType<typeof usage> }> {
  const events = (await jsm.streams.info(n.streams.events)).config;
  const name = `BENCH_RAW_${Date.now()}`;
  await jsm.streams.add({ ...events, name, subjects: [`benchraw.>`] });
  const js = jetstream(nc);
  const payload = new TextEncoder().encode(
    JSON.stringify({
      id: 'x'.repeat(22),
      type: 'TaskStarted',
      v: 1,
      data: { attemptId: 'y'.repeat(22), workerId: 'bench-w0-abcdefghijkl' },
    }),
  );
  let next = 0;
  const before = await sample();
  const started = performance.now();
  const lane = async () => {
    while (next < count) await js.publish(`benchraw.t${next++ % 1000}`, payload);
  };
  await Promise.all(Array.from({ length: 512 }, lane));
  const rate = count / ((performance.now() - started) / 1000);
  const cost = usage(before, await sample(), count);
  await jsm.streams.delete(name);
  return { rate, usage: cost };
}

/** CPU used so far by each process of the tree, and nats-server's message counters. */
export interface Sample {
  at: number;
  cpuS: Record<string, number>;
  /**
   * Messages into and out of nats-server (/varz): every publish, reply, delivery and ack,
   * less the deliveries to the traffic counter's own subscription.
   */
  serverMsgs: number;
  /** The traffic counter's weighted counts by kind (bench/e2e/traffic.ts), if one runs. */
  kinds: Map<string, number>;
}

/** `traffic()`: the counter while one runs (its own load is then part of every figure). */
export function sampler(
  pids: () => Record<string, number>,
  monitorUrl: string,
  traffic: () => TrafficCounter | undefined,
) {
  return async (): Promise<Sample> => {
    const counter = traffic();
    const varz = (await (await fetch(`${monitorUrl}/varz`)).json()) as {
      in_msgs: number;
      out_msgs: number;
    };
    const cpuS: Record<string, number> = {};
    for (const [name, pid] of Object.entries(pids())) {
      try {
        cpuS[name] = cpuSecondsOf(pid);
      } catch {
        // the process is gone (a killed worker)
      }
    }
    return {
      at: performance.now(),
      cpuS,
      serverMsgs: varz.in_msgs + varz.out_msgs - (counter?.received() ?? 0),
      kinds: counter?.snapshot() ?? new Map(),
    };
  };
}

/** Per unit of work between two samples: CPU ms by process, server messages, cores busy. */
export function usage(a: Sample, b: Sample, units: number) {
  const cpuMs: Record<string, number> = {};
  let total = 0;
  for (const [name, s] of Object.entries(b.cpuS)) {
    const ms = (s - (a.cpuS[name] ?? s)) * 1000;
    const group = name.startsWith('worker') ? 'workers' : name;
    cpuMs[group] = (cpuMs[group] ?? 0) + ms / units;
    total += ms;
  }
  return {
    cpuMsPerUnit: cpuMs,
    totalCpuMsPerUnit: total / units,
    serverMsgsPerUnit: (b.serverMsgs - a.serverMsgs) / units,
    serverMsgsByKind: trafficDelta(a.kinds, b.kinds, units),
    coresBusy: total / (b.at - a.at),
  };
}
