/**
 * Bounded finalization: memory, trust in a result's `ref`, and time.
 *
 * - four JSON outputs at the real default SONAR_MAX_OUTPUT, finalized at once by a real
 *   `sonar backend` process, keep its peak RSS (VmHWM) under 1 GiB;
 * - an output over the limit is refused from its metadata, no byte read;
 * - a ref to another object, or a `bytes` that is not the stored size, poisons at once;
 * - a sink that never settles costs one deadline per delivery and ends Poisoned within its
 *   delivery budget, while the lane goes on finalizing other jobs.
 */
import { readFileSync } from 'node:fs';
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import type { Names } from '../../streams/names.js';
import { FailureLog } from '../../src/backend/finalize/failure-log.js';
import { IO_TIMEOUT_LEASES } from '../../src/backend/finalize/finalizer-pool.js';
import { loadConfig } from '../../src/config.js';
import { outputKey } from '../../src/storage/output-store.js';
import type {
  OutputBody,
  ResultRecord,
  ResultsSink,
  UpsertOutcome,
} from '../../src/storage/results-sink.js';
import { eventually } from '../helpers/eventually.js';
import { InstrumentedOutputs, InstrumentedSink, taskIds } from '../helpers/finalize-fixtures.js';
import { finalizeWorldPerFile } from '../helpers/finalize-world.js';
import type { FinalizeScene } from '../helpers/finalize-world.js';
import { spawnSonar } from '../helpers/sonar-process.js';

const world = finalizeWorldPerFile();
const { nats } = world;

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** A JSON array of records, exactly `size` bytes (whitespace pads it). */
function jsonOfSize(size: number): Uint8Array {
  const buf = Buffer.alloc(size, 0x20);
  const item = Buffer.from(
    JSON.stringify({
      id: 123456,
      name: 'sensor-ß-42',
      values: [1.5, -2e-3, 0, true, null],
      note: 'a "quoted" \\ line\n',
    }) + ',',
  );
  buf[0] = 0x5b;
  let at = 1;
  while (at + item.length + 2 < size) at += item.copy(buf, at);
  buf[at] = 0x30;
  buf[size - 1] = 0x5d;
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** A field of /proc/<pid>/status in bytes (`VmHWM`: peak RSS; `VmRSS`: now). */
function procKb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

async function failureHistory(n: Names, taskId: string) {
  return (await FailureLog.open(nats.nc, n)).history('r1', taskId, 'a1');
}

async function poisonedError({ n, w }: FinalizeScene, taskId: string) {
  const events = await w.store.readAggregate(n.subjects.task('r1', taskId));
  const last = events.at(-1)!;
  expect(last.type).toBe('TaskPoisoned');
  return last.data as { error: string; deliveries: number };
}

describe('bounded finalization', () => {
  it('four JSON outputs at the default SONAR_MAX_OUTPUT, finalized at once, keep a backend under 1 GiB RSS', async () => {
    const limit = loadConfig({}).maxOutputBytes;
    expect(limit).toBe(64 * MiB);
    // The real backend's default lease, the topology's too.
    const s = await world.scene({});
    const { n } = s;
    const outputs = s.objects;
    const big = jsonOfSize(limit);
    const ids = taskIds(4);
    const jobs = await s.seed({
      runId: 'r1',
      taskIds: ids,
      output: 'json',
      stored: () => true,
      outputFor: () => big,
      outputs,
    });
    const backend = spawnSonar('backend', ['backend'], {
      SONAR_NATS_URL: nats.server.url,
      SONAR_PREFIX: n.prefix,
    });
    try {
      await eventually(() => backend.stderr().includes('finalizer pool started'), {
        timeoutMs: 30_000,
      });
      const baseline = procKb(backend.pid, 'VmRSS');
      const jsm = await jetstreamManager(nats.nc);
      let leased = 0;
      const startedAt = performance.now();
      await s.enqueue(jobs);
      await eventually(
        async () => {
          const info = await jsm.consumers.info(n.streams.finalize, n.consumers.finalizer);
          leased = Math.max(leased, info.num_ack_pending);
          return s.countIn('r1', 'Succeeded') === ids.length;
        },
        { timeoutMs: 150_000, intervalMs: 100 },
      );
      const tookMs = performance.now() - startedAt;
      const peak = procKb(backend.pid, 'VmHWM');
      console.log(
        `4 x ${limit / MiB} MiB JSON finalized in ${(tookMs / 1000).toFixed(1)} s, ` +
          `${leased} jobs leased at once; backend RSS ${(baseline / MiB).toFixed(0)} MiB idle, ` +
          `peak (VmHWM) ${(peak / MiB).toFixed(0)} MiB`,
      );
      // All four lanes held a job at once: the peak is that of four outputs in flight.
      expect(leased).toBe(4);
      expect(peak).toBeLessThan(GiB);
      expect(await s.kv.get('r1', 't0')).toMatchObject({ bytes: limit, kind: 'json' });
    } finally {
      await backend.kill('SIGTERM');
    }
  }, 240_000);

  it('refuses an output over SONAR_MAX_OUTPUT from its metadata, without reading it', async () => {
    const s = await world.scene();
    const { n } = s;
    const outputs = new InstrumentedOutputs(s.objects);
    const sink = new InstrumentedSink(null);
    await s.startPool({ sink, outputs, env: { SONAR_MAX_OUTPUT: '1MiB' } });
    await s.seedAndEnqueue({
      runId: 'r1',
      taskIds: ['big'],
      stored: () => true,
      outputFor: () => jsonOfSize(MiB + 1),
      outputs,
    });
    await eventually(() => s.stateOf('r1', 'big') === 'Poisoned');
    const poisoned = await poisonedError(s, 'big');
    expect(poisoned.error).toBe(
      `output "r1/big/a1" of r1.big is 1048577 bytes, over SONAR_MAX_OUTPUT (1MiB)`,
    );
    expect(poisoned.deliveries).toBe(1);
    const history = await failureHistory(n, 'big');
    expect(history).toMatchObject([{ delivery: 1, permanent: true, error: poisoned.error }]);
    expect(outputs.bytesRead.get(outputKey('r1', 'big', 'a1')) ?? 0).toBe(0);
    expect(sink.calls).toHaveLength(0);
  });

  it("refuses a ref to another task's object, and a wrong bytes, at once", async () => {
    const s = await world.scene();
    const { n } = s;
    const outputs = new InstrumentedOutputs(s.objects);
    const sink = new InstrumentedSink(s.kv);
    await s.startPool({ sink, outputs });
    // Another task's output, in the store under its own name.
    const theirs = outputKey('r1', 'victim', 'a1');
    await outputs.put(
      theirs,
      new TextEncoder().encode(JSON.stringify({ secret: 'x'.repeat(20_000) })),
    );
    await s.seedAndEnqueue({
      runId: 'r1',
      taskIds: ['thief', 'liar', 'honest'],
      stored: () => true,
      outputFor: (t) => jsonOfSize(t === 'honest' ? 40_000 : 30_000),
      outputs,
      refFor: (t) => (t === 'thief' ? theirs : undefined),
      declaredBytesFor: (t) => (t === 'liar' ? 29_000 : undefined),
    });
    await eventually(
      () =>
        s.stateOf('r1', 'thief') === 'Poisoned' &&
        s.stateOf('r1', 'liar') === 'Poisoned' &&
        s.stateOf('r1', 'honest') === 'Succeeded',
    );
    const thief = await poisonedError(s, 'thief');
    expect(thief.error).toBe(
      `output ref "r1/victim/a1" of r1.thief is not attempt a1's own object "r1/thief/a1"`,
    );
    const liar = await poisonedError(s, 'liar');
    expect(liar.error).toBe(
      `output "r1/liar/a1" of r1.liar is 30000 bytes in the output store, but the result declared 'bytes' 29000`,
    );
    for (const t of ['thief', 'liar']) {
      expect(await failureHistory(n, t)).toMatchObject([{ delivery: 1, permanent: true }]);
      expect(sink.callsFor(`r1.${t}`)).toHaveLength(0);
    }
    // Refused before any read: neither the other task's object nor the liar's was read.
    expect(outputs.bytesRead.get(theirs) ?? 0).toBe(0);
    expect(outputs.bytesRead.get(outputKey('r1', 'liar', 'a1')) ?? 0).toBe(0);
    expect(outputs.bytesRead.get(outputKey('r1', 'honest', 'a1'))).toBe(40_000);
  });

  it('a sink that never settles ends Poisoned within its delivery budget, and the lane moves on', async () => {
    const leaseMs = 1_000;
    const maxDeliver = 6;
    const backoff = { backoffBase: 100, backoffCap: 400 };
    const s = await world.scene({ finalizeLeaseMs: leaseMs });
    const { n, kv } = s;
    const attempts: number[] = [];
    // Hangs for task `stuck` (and ignores its signal, as a careless sink would).
    const sink: ResultsSink = {
      upsert(record: ResultRecord, output: OutputBody, signal: AbortSignal) {
        if (record.taskId !== 'stuck') return kv.upsert(record, output);
        attempts.push(performance.now());
        void signal;
        return new Promise<UpsertOutcome>(() => {});
      },
    };
    // One lane: the good job behind the stuck one is finalized only if the lane is freed.
    await s.startPool({ sink, size: 1, ...backoff, env: { SONAR_FINALIZE_LEASE: '1s' } });
    const [stuck, good] = await s.seed({ runId: 'r1', taskIds: ['stuck', 'good'] });
    const startedAt = performance.now();
    await s.enqueue([stuck!]);
    await eventually(() => attempts.length === 1);
    await s.enqueue([good!]);
    await eventually(() => s.stateOf('r1', 'good') === 'Succeeded', {
      timeoutMs: 20_000,
    });
    expect(s.stateOf('r1', 'stuck')).toBe('Finalizing');
    const timeoutMs = IO_TIMEOUT_LEASES * leaseMs;
    // Each delivery waits out its deadline; the naks in between wait 100, 200, 400... ms.
    const budgetMs = maxDeliver * timeoutMs + 4 * 400 + 300;
    await eventually(() => s.stateOf('r1', 'stuck') === 'Poisoned', {
      timeoutMs: budgetMs + 10_000,
      intervalMs: 100,
    });
    const tookMs = performance.now() - startedAt;
    console.log(
      `never-settling sink poisoned after ${(tookMs / 1000).toFixed(1)} s ` +
        `(${maxDeliver} deliveries x ${timeoutMs} ms deadline, budget ${budgetMs} ms)`,
    );
    expect(tookMs).toBeGreaterThanOrEqual(maxDeliver * timeoutMs - 100);
    expect(tookMs).toBeLessThan(budgetMs + 5_000);
    expect(attempts).toHaveLength(maxDeliver);
    const poisoned = await poisonedError(s, 'stuck');
    expect(poisoned).toMatchObject({
      deliveries: maxDeliver,
      error: 'sink write of r1.stuck did not settle within 4s',
    });
    const history = await failureHistory(n, 'stuck');
    expect(history.map((f) => f.delivery)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(history.every((f) => !f.permanent && /did not settle within 4s/.test(f.error))).toBe(
      true,
    );
    const jsm = await jetstreamManager(nats.nc);
    await eventually(async () => (await jsm.streams.info(n.streams.finalize)).state.messages === 0);
  }, 90_000);
});
