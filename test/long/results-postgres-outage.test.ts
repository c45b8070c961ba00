/**
 * The results database down for two minutes in the middle of a burst: the finalizer pools
 * pause (their circuit breaker) and spend no delivery, so nothing is poisoned and nothing is
 * lost, though two minutes are four times what a job's deliveries last at these settings
 * (a 2 s lease, 6 deliveries, 1 s doubling backoff: about 31 s of retries).
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { finishClean, firstAfter } from '../chaos/scenario.js';
import type { Fault } from '../chaos/scenario.js';
import { chaosRun } from '../chaos/world.js';
import { postgresWorldPerFile } from '../chaos/postgres-world-per-file.js';

const TASKS = 600;
const OUTAGE_MS = 120_000;

const chaos = postgresWorldPerFile();
const postgres = chaos.postgres;

describe('long: the results database down for 2 minutes mid-burst', () => {
  it('loses nothing and poisons nothing', async () => {
    const w = await chaos.running(chaosRun('burst', TASKS), { finalizers: 4, workers: 4 });
    await w.waitFinalized(Math.floor(TASKS * 0.2));

    const downAt = Date.now();
    await postgres().kill();
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    const jsm = await jetstreamManager(w.nc);
    const held = (await jsm.streams.info(w.n.streams.finalize)).state.messages;
    await postgres().restart();
    const faults: Fault[] = [{ what: `results database down ${OUTAGE_MS / 1000} s`, at: downAt }];

    await finishClean(w, 'burst', 'results-postgres-outage', {
      faults,
      // Back when the first task after the database's return is finalized.
      recovered: (log, at) =>
        firstAfter((e) => e.type === 'TaskFinalized')(log, at + OUTAGE_MS, Infinity),
      tasks: TASKS,
      timeoutMs: 300_000,
    });
    // Jobs waited out the outage in the queue and in hand...
    expect(held).toBeGreaterThan(0);
    // ...and not one failed delivery was recorded: the outage spent none.
    const errors = await jsm.streams.info(`KV_${w.n.buckets.finalizeErrors}`);
    expect(errors.state.messages).toBe(0);
    const poison = await jsm.streams.info(w.n.streams.poison);
    expect(poison.state.messages).toBe(0);
    // The pools said they paused (a backend with no job in hand then had nothing to pause).
    const paused = w.backends.filter((b) =>
      b.proc.stderr().includes('results sink unavailable: finalizers paused'),
    );
    expect(paused.length).toBeGreaterThan(0);
  });
});
