import { jetstreamManager } from '@nats-io/jetstream';
import type { Fault } from './scenario.js';
import type { ChaosWorld } from './world.js';

/**
 * The finalizers-killed faults, whichever the results sink: SIGKILL one backend (its
 * finalizer pool with it), then another, then two at once, at 20%, 40% and 60% of `tasks`
 * finalized, each replaced by a new backend. Each fault names the jobs queued at the kill.
 */
export async function killFinalizersInWaves(w: ChaosWorld, tasks: number): Promise<Fault[]> {
  const jsm = await jetstreamManager(w.nc);
  const backlog = async (): Promise<number> =>
    (await jsm.streams.info(w.n.streams.finalize)).state.messages;
  const faults: Fault[] = [];
  for (const [progress, count] of [
    [0.2, 1],
    [0.4, 1],
    [0.6, 2],
  ] as const) {
    await w.waitFinalized(Math.floor(tasks * progress));
    const victims = w.backends.filter((b) => b.proc.running).slice(0, count);
    const queued = await backlog();
    faults.push({
      what: `SIGKILL ${victims.map((v) => v.proc.name).join(',')} (${queued} jobs queued)`,
      at: Date.now(),
    });
    await Promise.all(victims.map((v) => v.proc.kill('SIGKILL')));
    await w.startBackends(victims.length);
  }
  return faults;
}
