/** The end-to-end bench's tables: docs/benchmarks.md style (markdown), ranges over rounds. */
import type { Latency, memoryAt, Recovery, Throughput } from './phases.js';
import type { ReplayScaleResult } from './replay-scale.js';
import type { usage } from './measure.js';

type Usage = ReturnType<typeof usage>;

export interface E2eResult {
  machine: { cpus: number; node: string };
  setup: Record<string, unknown>;
  rawPublish: { rate: number; usage: Usage }[];
  throughput: Throughput[];
  /** One more throughput run with the traffic counter on: messages by kind, not speed. */
  traffic: Throughput | null;
  light: Latency[];
  recovery: Recovery[];
  memory: Awaited<ReturnType<typeof memoryAt>>[];
  replay: ReplayScaleResult | null;
}

const TASK_EVENTS = [
  'TaskCreated',
  'TaskPublished',
  'TaskStarted',
  'TaskResultAccepted',
  'TaskFinalized',
] as const;

/** Per round: writes per task on the default path (named), the rest (amortized), all. */
export function writesPerTask(t: Throughput, prefix: string) {
  const upper = prefix.toUpperCase();
  const named = new Map<string, { stream: string; n: number }>();
  for (const type of TASK_EVENTS) {
    named.set(type, { stream: `${upper}_EVENTS`, n: t.events.get(type) ?? 0 });
  }
  named.set('dispatch message', {
    stream: `${upper}_DISPATCH`,
    n: t.writes.get(`${upper}_DISPATCH`) ?? 0,
  });
  named.set('finalization job', {
    stream: `${upper}_FINALIZE`,
    n: t.writes.get(`${upper}_FINALIZE`) ?? 0,
  });
  named.set('result record', {
    stream: `KV_${prefix}_results`,
    n: t.writes.get(`KV_${prefix}_results`) ?? 0,
  });
  const amortized = new Map<string, { stream: string; n: number }>();
  for (const [type, n] of t.events) {
    if (!(TASK_EVENTS as readonly string[]).includes(type)) {
      amortized.set(type, { stream: `${upper}_EVENTS`, n });
    }
  }
  const why: Record<string, string> = {
    [`KV_${prefix}_workers`]: 'pulses',
    [`KV_${prefix}_locks`]: 'leader lock renewals',
    [`OBJ_${prefix}_snapshots`]: 'projection snapshot chunks',
  };
  const namedStreams = new Set([
    `${upper}_EVENTS`,
    `${upper}_DISPATCH`,
    `${upper}_FINALIZE`,
    `KV_${prefix}_results`,
  ]);
  for (const [stream, n] of t.writes) {
    if (!namedStreams.has(stream)) amortized.set(why[stream] ?? stream, { stream, n });
  }
  const sum = (m: Map<string, { n: number }>) => [...m.values()].reduce((a, b) => a + b.n, 0);
  const total = [...t.writes.values()].reduce((a, b) => a + b, 0);
  return {
    named,
    amortized,
    defaultPath: sum(named) / t.tasks,
    amortizedPerTask: sum(amortized) / t.tasks,
    total: total / t.tasks,
  };
}

const range = (xs: number[], fmt: (x: number) => string): string => {
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return fmt(lo) === fmt(hi) ? fmt(lo) : `${fmt(lo)}-${fmt(hi)}`;
};
const k = (x: number) => `${(x / 1000).toFixed(1)}k`;
const int = (x: number) => Math.round(x).toLocaleString('en-US');
const ms = (x: number) => `${Math.round(x)} ms`;
const s1 = (x: number) => `${(x / 1000).toFixed(1)} s`;
const f2 = (x: number) => x.toFixed(2);
const pct = (x: number) => `${Math.round(x * 100)}%`;
const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');

/** The backends' names in the CPU figures: `backend` (the leader), then `backend 2` and on. */
const backendsOf = (tp: E2eResult['throughput']): string[] =>
  [...new Set(tp.flatMap((t) => Object.keys(t.usage.cpuMsPerUnit)))]
    .filter((name) => name.startsWith('backend'))
    .sort();

export function mainRows(r: E2eResult): string[][] {
  const prefix = 'bench';
  const tp = r.throughput;
  const costs = tp.map((t) => writesPerTask(t, prefix));
  const raws = r.rawPublish.map((x) => x.rate);
  const rawMax = Math.max(...raws);
  const ceilings = costs.map((c) => rawMax / c.total);
  const ofCeiling = tp.map((t, i) => t.tasksPerSec / ceilings[i]!);
  const light = r.light;
  const rows: string[][] = [
    ['raw async publish (same run, before/after rounds)', `${range(raws, k)} msgs/s`, ''],
    [
      'JetStream writes per task, default path (8 named, below)',
      range(
        costs.map((c) => c.defaultPath),
        f2,
      ),
      `<= 8 ${mark(costs.every((c) => c.defaultPath <= 8))}`,
    ],
    [
      '  + amortized (run/step events, pulses, lock, snapshots)',
      range(
        costs.map((c) => c.amortizedPerTask),
        f2,
      ),
      '',
    ],
    ['ceiling: best raw publish / all writes per task', `${range(ceilings, int)} tasks/s`, ''],
    [
      `throughput, submit -> Succeeded (${k(tp[0]?.tasks ?? 0)} tasks)`,
      `${range(
        tp.map((t) => t.tasksPerSec),
        int,
      )} tasks/s = ${range(ofCeiling, pct)} of ceiling`,
      `>= 35% ${mark(ofCeiling.every((x) => x >= 0.35))}`,
    ],
    [
      'CPU per task, all processes (saturation)',
      `${range(
        tp.map((t) => t.usage.totalCpuMsPerUnit),
        f2,
      )} ms on ${range(
        tp.map((t) => t.usage.coresBusy),
        f2,
      )} cores busy`,
      `<= 0.6 ms ${mark(tp.every((t) => t.usage.totalCpuMsPerUnit <= 0.6))}`,
    ],
    ...['nats-server', ...backendsOf(tp), 'workers', 'bench'].map((p) => [
      `  of which ${p === 'backend' && backendsOf(tp).length > 1 ? 'backend 1 (leader)' : p}`,
      `${range(
        tp.map((t) => t.usage.cpuMsPerUnit[p] ?? 0),
        f2,
      )} ms`,
      '',
    ]),
    [
      'CPU per raw publish (nats-server + publisher)',
      `${range(
        r.rawPublish.map((x) => x.usage.totalCpuMsPerUnit * 1000),
        int,
      )} us`,
      '',
    ],
    [
      'nats-server messages in + out, per task / per raw publish',
      `${range(
        tp.map((t) => t.usage.serverMsgsPerUnit),
        f2,
      )} / ${range(
        r.rawPublish.map((x) => x.usage.serverMsgsPerUnit),
        f2,
      )}`,
      // Counted with one backend: each other backend reads every event once more.
      backendsOf(tp).length > 1
        ? ''
        : `<= 24 ${mark(tp.every((t) => t.usage.serverMsgsPerUnit <= 24))}`,
    ],
    [
      'submit -> start p50 / p99, saturation (one run)',
      `${range(
        tp.map((t) => t.startP50),
        s1,
      )} / ${range(
        tp.map((t) => t.startP99),
        s1,
      )}`,
      '',
    ],
    [
      'submit -> Succeeded p50 / p99, saturation',
      `${range(
        tp.map((t) => t.doneP50),
        s1,
      )} / ${range(
        tp.map((t) => t.doneP99),
        s1,
      )}`,
      '',
    ],
    [
      `submit -> start p50 / p99, ${light[0]?.offeredPerSec ?? 50} tasks/s (1-task runs)`,
      `${range(
        light.map((l) => l.startP50),
        ms,
      )} / ${range(
        light.map((l) => l.startP99),
        ms,
      )}`,
      `p50 <= 20 ms ${mark(light.every((l) => l.startP50 <= 20))}`,
    ],
    [
      'submit -> Succeeded p50 / p99, same load',
      `${range(
        light.map((l) => l.doneP50),
        ms,
      )} / ${range(
        light.map((l) => l.doneP99),
        ms,
      )}`,
      '',
    ],
    [
      'recovery: SIGKILL -> its tasks Running elsewhere (first..last)',
      r.recovery
        // The victim may have held none of the held tasks: nothing to recover in that round.
        .map((x) =>
          x.tasks === 0 ? 'none held' : `${s1(x.firstMs)}..${s1(x.lastMs)} (${x.tasks} tasks)`,
        )
        .join(', '),
      'orphanAge 5 s, TTL 5 s',
    ],
    [
      'backend RSS, fresh backend + 100k Pending tasks: up / submitted / after its snapshot',
      `${range(
        r.memory.map((m) => m.up.rssMb),
        int,
      )} / ${range(
        r.memory.map((m) => m.submitted.rssMb),
        int,
      )} / ${range(
        r.memory.map((m) => m.after.rssMb),
        int,
      )} MB (peak ${range(
        r.memory.map((m) => m.after.peakMb),
        int,
      )})`,
      `< 300 MB ${mark(r.memory.every((m) => m.after.peakMb < 300))}`,
    ],
  ];
  const rp = r.replay;
  if (rp) {
    const best = Math.max(...rp.snapshotRestartMs);
    rows.push(
      [
        `restart, full replay (${k(rp.events)} events, ${k(rp.tasks)} tasks)`,
        `${range(rp.fullReplayMs, s1)} (process up in ${range(rp.fullStartMs, s1)})`,
        '',
      ],
      [
        `restart, snapshot + ${k(rp.tail)}-event tail`,
        `${range(rp.snapshotRestartMs, s1)}: load ${range(rp.snapshotLoadMs, s1)} + tail (process up in ${range(rp.snapshotStartMs, s1)})`,
        `< 10 s ${mark(best < 10_000)}`,
      ],
      [
        'snapshot write by the leader (gzip, object store)',
        `${s1(rp.snapshot.ms)}, ${int(rp.snapshot.bytes / 2 ** 20)} MiB (${int(rp.snapshot.rawBytes / 2 ** 20)} MiB JSON)`,
        '',
      ],
      ['backend RSS after the full replay', `${int(rp.rssAfterReplayMb)} MB`, ''],
    );
  }
  return rows;
}

/** Every write of a task's default path by name, then the amortized ones (ranges over rounds). */
export function costTable(tp: Throughput[], prefix: string): string[][] {
  const costs = tp.map((t) => writesPerTask(t, prefix));
  const rows: string[][] = [];
  const names = (pick: 'named' | 'amortized') => [
    ...new Set(costs.flatMap((c) => [...c[pick].keys()])),
  ];
  const row = (pick: 'named' | 'amortized', name: string, label: string) => {
    const per = costs.map((c, i) => (c[pick].get(name)?.n ?? 0) / tp[i]!.tasks);
    const stream = costs.map((c) => c[pick].get(name)?.stream).find((s) => s) ?? '';
    rows.push([label, stream, range(per, (x) => x.toFixed(pick === 'named' ? 2 : 4))]);
  };
  for (const name of names('named')) row('named', name, name);
  rows.push([
    '= default path',
    '',
    range(
      costs.map((c) => c.defaultPath),
      f2,
    ),
  ]);
  for (const name of names('amortized')) row('amortized', name, `amortized: ${name}`);
  rows.push([
    '= all writes',
    '',
    range(
      costs.map((c) => c.total),
      f2,
    ),
  ]);
  return rows;
}

export function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(line(head));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
}

/**
 * nats-server messages per task by kind (bench/e2e/traffic.ts), largest first, ranges over
 * rounds; the counted total against /varz's (the rest: fan-out of core publishes, and the
 * pulses and sweeps of the window).
 */
export function kindTable(tp: Throughput[]): string[][] {
  const kinds = tp.map((t) => t.usage.serverMsgsByKind);
  const all = [...new Set(kinds.flatMap((k) => [...k.keys()]))];
  const mean = (name: string) => kinds.reduce((a, k) => a + (k.get(name) ?? 0), 0) / kinds.length;
  // Replies stay under their request.
  const requests = all.filter((n) => !n.startsWith('  reply to '));
  requests.sort((a, b) => mean(b) + mean(`  reply to ${b}`) - (mean(a) + mean(`  reply to ${a}`)));
  const rows: string[][] = [];
  const cell = (name: string) =>
    range(
      kinds.map((k) => k.get(name) ?? 0),
      (x) => x.toFixed(2),
    );
  for (const name of requests) {
    if (mean(name) + mean(`  reply to ${name}`) < 0.005) continue;
    rows.push([name, cell(name)]);
    if (all.includes(`  reply to ${name}`))
      rows.push([`  reply to ${name}`, cell(`  reply to ${name}`)]);
  }
  const counted = kinds.map((k) => [...k.values()].reduce((a, b) => a + b, 0));
  rows.push(['= counted', range(counted, f2)]);
  rows.push([
    '= /varz in + out',
    range(
      tp.map((t) => t.usage.serverMsgsPerUnit),
      f2,
    ),
  ]);
  return rows;
}
