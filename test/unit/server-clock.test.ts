import { describe, expect, it } from 'vitest';
import { CLOCK_SAMPLES, ServerClock } from '../../src/backend/reconciler/server-clock.js';

describe('ServerClock', () => {
  it('is the local clock before any sample', () => {
    expect(new ServerClock().offsetMs()).toBe(0);
  });

  it('keeps the quickest sample: a reply handled seconds late does not move the clock', () => {
    const clock = new ServerClock();
    clock.add({ offsetMs: 12, roundTripMs: 3 });
    // An event loop busy for 3 s after the reply: the midpoint is 1.5 s late.
    clock.add({ offsetMs: 12 - 1_500, roundTripMs: 3_003 });
    expect(clock.offsetMs()).toBe(12);
    clock.add({ offsetMs: 11, roundTripMs: 2 });
    expect(clock.offsetMs()).toBe(11);
  });

  it('prefers the newer of two equally quick samples', () => {
    const clock = new ServerClock();
    clock.add({ offsetMs: 5, roundTripMs: 2 });
    clock.add({ offsetMs: 7, roundTripMs: 2 });
    expect(clock.offsetMs()).toBe(7);
  });

  it('forgets samples past the window, so a stepped server clock shows through', () => {
    const clock = new ServerClock();
    clock.add({ offsetMs: 0, roundTripMs: 1 });
    for (let i = 0; i < CLOCK_SAMPLES - 1; i++) clock.add({ offsetMs: 60_000, roundTripMs: 4 });
    expect(clock.offsetMs()).toBe(0);
    clock.add({ offsetMs: 60_000, roundTripMs: 4 });
    expect(clock.offsetMs()).toBe(60_000);
  });
});
