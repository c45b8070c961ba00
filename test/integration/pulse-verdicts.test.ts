import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { Pulse } from '../../src/worker/pulse.js';
import type { PulseEntry, Standing, KeyVanishedError } from '../../src/worker/pulse.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();

const entry = (workerId: string): PulseEntry => ({
  workerId,
  host: 'h',
  tags: ['a'],
  slots: 1,
  active: true,
  running: [],
});

/** A pulse on a fresh bucket whose standing answers `answers` in turn, counting the questions. */
async function pulseOf(workerId: string, ...answers: (Standing | Error)[]) {
  const n = await freshTopology(nats.nc);
  const kv = await new Kvm(nats.nc).open(n.buckets.workers);
  const seen = { asked: 0, vanished: [] as KeyVanishedError[] };
  const pulse = new Pulse(
    kv,
    () => entry(workerId),
    60_000,
    silentLogger,
    (err) => seen.vanished.push(err),
    () => {
      const answer = answers[Math.min(seen.asked++, answers.length - 1)]!;
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
  );
  return { kv, pulse, seen };
}

describe('a worker whose first pulse lands late', () => {
  it('asks its standing, and stops when the backend says it is gone', async () => {
    const { kv, pulse, seen } = await pulseOf('late1', 'gone');
    // As a backend that declared the worker Lost leaves it: a delete marker on the key.
    await kv.delete('late1');
    // The first put is not held up by the question: the next beat asks it.
    await pulse.start(performance.now() - 1);
    expect(seen.asked).toBe(0);
    await pulse.beat();
    expect(seen.asked).toBe(1);
    expect(seen.vanished).toHaveLength(1);
    expect(seen.vanished[0]?.message).toMatch(/worker late1 is Lost/);
    pulse.stop();
  });

  it('carries on when the backend says it is still joined', async () => {
    const { kv, pulse, seen } = await pulseOf('late2', 'joined');
    await pulse.start(performance.now() - 1);
    await pulse.beat();
    await pulse.beat();
    expect(seen.asked).toBe(1);
    expect(seen.vanished).toEqual([]);
    expect((await kv.get('late2'))?.operation).toBe('PUT');
    pulse.stop();
  });

  it('a question left unanswered is asked again at the next beat', async () => {
    const { pulse, seen } = await pulseOf('late3', new Error('no backend answered'), 'gone');
    await pulse.start(performance.now() - 1);
    await pulse.beat();
    expect(seen.asked).toBe(1);
    expect(seen.vanished).toEqual([]);
    await pulse.beat();
    expect(seen.asked).toBe(2);
    expect(seen.vanished).toHaveLength(1);
    pulse.stop();
  });

  it('a first pulse in time asks nothing', async () => {
    const { pulse, seen } = await pulseOf('prompt', 'gone');
    await pulse.start(performance.now() + 60_000);
    await pulse.beat();
    expect(seen.asked).toBe(0);
    expect(seen.vanished).toEqual([]);
    pulse.stop();
  });
});

describe('a worker saying leave', () => {
  it('takes its key deleted by the backend for the goodbye: no put back, no question, no failure', async () => {
    const { kv, pulse, seen } = await pulseOf('leaving1', 'gone');
    await pulse.start();
    pulse.leaving();
    // Still pulsing while the leave is on its way.
    await pulse.beat();
    expect((await kv.get('leaving1'))?.operation).toBe('PUT');
    // As the leave handler does, then a put that was in flight lands on the delete.
    await kv.delete('leaving1');
    await pulse.beat();
    expect(seen.asked).toBe(0);
    expect(seen.vanished).toEqual([]);
    expect((await kv.get('leaving1'))?.operation).toBe('DEL');
    // And it has stopped: a later beat puts nothing.
    await pulse.beat();
    expect((await kv.get('leaving1'))?.operation).toBe('DEL');
  });

  it('without leaving, the same delete is a verdict: the key is put back and the backend asked', async () => {
    const { kv, pulse, seen } = await pulseOf('staying1', 'gone');
    await pulse.start();
    await kv.delete('staying1');
    await pulse.beat();
    expect(seen.asked).toBe(1);
    expect(seen.vanished).toHaveLength(1);
    pulse.stop();
  });
});
