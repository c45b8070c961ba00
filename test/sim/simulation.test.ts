import { describe, it, expect } from 'vitest';
import { parseTagRates } from '../../actors/reconciler/tag-rates.js';
import { FleetSim } from './fleet-sim.js';
import type { SimOptions, SimStats } from './fleet-sim.js';

const OPTIONS: SimOptions = {
  seed: 20260101,
  workers: 520,
  tags: 24,
  runs: 20,
  tasksPerRun: 1_000,
  maxTicks: 6_000,
};

/**
 * What the run must have exercised to claim it: crashes of both kinds, drains, joins, long
 * commands finished on live workers, slow starts, recoveries, deaths and starvation.
 */
const EXERCISED = [
  'crashesSilent',
  'crashesExited',
  'drains',
  'joins',
  'longTasksDone',
  'slowStarts',
  'requeuedWorkerLost',
  'workersLostExpired',
  'dead',
  'starvedEvents',
  'servedEvents',
] as const satisfies readonly (keyof SimStats)[];

describe('reconciler simulation (seeded fleet, simulated clock)', () => {
  it('keeps every invariant every tick, ends every task, and replays byte for byte', () => {
    const started = performance.now();
    const first = new FleetSim(OPTIONS).run();
    const ms = performance.now() - started;
    const { stats } = first;
    console.log(`simulation: ${stats.ticks} ticks in ${ms.toFixed(0)} ms`, JSON.stringify(stats));

    expect(first.violations.slice(0, 20)).toEqual([]);
    expect(first.unfinished.slice(0, 20)).toEqual([]);
    expect(stats.tasks).toBeGreaterThanOrEqual(20_000);
    expect(stats.workersSeen).toBeGreaterThanOrEqual(500);
    for (const seen of EXERCISED) expect(stats[seen], seen).toBeGreaterThan(0);
    expect(stats.runsByState['Succeeded']).toBeGreaterThan(0);
    expect(stats.runsByState['Failed']).toBeGreaterThan(0);

    const second = new FleetSim(OPTIONS).run();
    expect(second.hash).toBe(first.hash);
    expect(second.stats).toEqual(first.stats);
  }, 120_000);

  const PLACEMENT: SimOptions = {
    ...OPTIONS,
    workers: 260,
    runs: 12,
    tasksPerRun: 800,
    placement: true,
  };

  it('with mixed priorities and delays: every invariant every tick, byte for byte per seed', () => {
    const first = new FleetSim(PLACEMENT).run();
    const { stats } = first;
    console.log('simulation with priorities and delays:', JSON.stringify(stats));
    expect(first.violations.slice(0, 20)).toEqual([]);
    expect(first.unfinished.slice(0, 20)).toEqual([]);
    expect(stats.delayedPlaced).toBeGreaterThan(0);
    expect(stats.maxDelayed).toBeGreaterThan(0);
    for (const seen of ['dead', 'starvedEvents', 'servedEvents'] as const) {
      expect(stats[seen], seen).toBeGreaterThan(0);
    }
    const second = new FleetSim(PLACEMENT).run();
    expect(second.hash).toBe(first.hash);
    expect(second.stats).toEqual(first.stats);
  }, 120_000);

  it('with priorities, delays AND rate-limited tags: no tag over its rate in any window, every invariant every tick, byte for byte per seed', () => {
    // A whole-number rate, one with a bigger burst over a longer period, a fractional one,
    // and `rare`, whose workers all crash for a while (its steps starve, rate or not).
    const rated: SimOptions = {
      ...PLACEMENT,
      config: { tagRates: parseTagRates('tag05=3/s,tag10=8/4s,tag00=0.5/s,rare=2/s') },
    };
    const first = new FleetSim(rated).run();
    const { stats } = first;
    console.log('simulation with priorities, delays and rate limits:', JSON.stringify(stats));
    expect(first.violations.slice(0, 20)).toEqual([]);
    expect(first.unfinished.slice(0, 20)).toEqual([]);
    expect(stats.ratePublished).toBeGreaterThan(0);
    expect(stats.rateHeld).toBeGreaterThan(0);
    expect(stats.delayedPlaced).toBeGreaterThan(0);
    for (const seen of ['dead', 'starvedEvents', 'servedEvents'] as const) {
      expect(stats[seen], seen).toBeGreaterThan(0);
    }
    const second = new FleetSim(rated).run();
    expect(second.hash).toBe(first.hash);
    expect(second.stats).toEqual(first.stats);
    expect(first.hash).not.toBe(new FleetSim(PLACEMENT).run().hash);
  }, 180_000);

  it('with aging off, no lower priority ever takes a tag a due higher one could have had', () => {
    const strict = { ...PLACEMENT, runs: 6, config: { priorityAgingMs: 0 } };
    const result = new FleetSim(strict).run();
    expect(result.violations.slice(0, 20)).toEqual([]);
    expect(result.unfinished.slice(0, 20)).toEqual([]);
    expect(result.hash).not.toBe(new FleetSim({ ...strict, config: {} }).run().hash);
  }, 120_000);

  it('logs different decisions for a different seed (the hash covers the decisions)', () => {
    const small = { ...OPTIONS, workers: 60, runs: 2, tasksPerRun: 300 };
    const a = new FleetSim(small).run();
    const b = new FleetSim({ ...small, seed: small.seed + 1 }).run();
    expect(a.violations).toEqual([]);
    expect(a.hash).not.toBe(b.hash);
  });
});
