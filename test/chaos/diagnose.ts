/**
 * What a stuck chaos scenario looks like from outside, for its failure message: the run's
 * task counts, the streams and consumers, and each process's warnings and errors.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { replay } from '../../actors/replay.js';
import { logLines } from './world.js';
import type { ChaosWorld } from './world.js';

export async function diagnose(w: ChaosWorld, runId: string): Promise<string> {
  const out: string[] = [];
  const safely = async (what: string, fn: () => Promise<unknown>): Promise<void> => {
    try {
      out.push(`${what}: ${JSON.stringify(await fn())}`);
    } catch (err: unknown) {
      out.push(`${what}: ${String(err)}`);
    }
  };
  await safely('status', () => w.status(runId));
  const jsm = await jetstreamManager(w.nc, { timeout: 2_000 }).catch(() => null);
  if (jsm) {
    for (const s of [w.n.streams.events, w.n.streams.dispatch, w.n.streams.finalize]) {
      await safely(s, async () => {
        const i = await jsm.streams.info(s);
        const consumers = [];
        let ephemeral = 0;
        for await (const c of jsm.consumers.list(s)) {
          // Ordered consumers (replays, status reads) are many and say little.
          if (c.config.durable_name === undefined) {
            ephemeral++;
            continue;
          }
          consumers.push({
            name: c.name,
            delivered: c.delivered.stream_seq,
            ackFloor: c.ack_floor.stream_seq,
            pending: c.num_pending,
            ackPending: c.num_ack_pending,
            waiting: c.num_waiting,
          });
        }
        return { state: i.state, leader: i.cluster?.leader, consumers, ephemeral };
      });
    }
  }
  // The first 20: a stalled run can leave hundreds Pending, and they all look alike.
  await safely('open tasks (first 20)', async () => (await openTasks(w)).slice(0, 20));
  await safely('workers registry', async () => {
    const kv = await new Kvm(w.nc).open(w.n.buckets.workers);
    const keys: string[] = [];
    for await (const k of await kv.keys()) keys.push(k);
    return keys;
  });
  const procs = [...w.backends.map((b) => b.proc), ...w.workers];
  for (const p of procs) {
    const noisy = logLines(p)
      .filter((l) => l['level'] === 'warn' || l['level'] === 'error')
      .slice(-6)
      .map((l) => `${String(l['time'])} ${String(l['level'])} ${String(l['msg'])} ${errText(l)}`);
    out.push(`--- ${p.name} (${p.running ? 'running' : 'exited'})\n${noisy.join('\n')}`);
  }
  return out.join('\n');
}

/**
 * Every task not settled, with its worker and whether that worker's registry entry lists it
 * in `running`: a Running task its live worker does not list is a phantom (nobody runs it,
 * and nothing recovers it while the worker pulses).
 */
async function openTasks(w: ChaosWorld): Promise<unknown[]> {
  const { projection } = replay(await w.exportLog());
  const kv = await new Kvm(w.nc).open(w.n.buckets.workers);
  const out: unknown[] = [];
  for (const [key, { snapshot }] of projection.tasks) {
    const state = String(snapshot.value);
    if (['Succeeded', 'Failed', 'Dead', 'Cancelled'].includes(state)) continue;
    const workerId = snapshot.context.workerId;
    const entry = workerId === null ? null : await kv.get(workerId).catch(() => null);
    const running =
      entry?.operation === 'PUT' ? entry.json<{ running?: string[] }>().running : undefined;
    out.push({
      key,
      state,
      workerId,
      workerState: workerId === null ? null : projection.workers.get(workerId)?.snapshot.value,
      listedByWorker: running === undefined ? 'no registry entry' : running.includes(key),
    });
  }
  return out;
}

function errText(l: Record<string, unknown>): string {
  const err = l['err'] as { message?: unknown } | undefined;
  return typeof err?.message === 'string' ? err.message.slice(0, 200) : '';
}
