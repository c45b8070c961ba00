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

  it('forgets samples past the window', () => {
    const clock = new ServerClock();
    clock.add({ offsetMs: 0, roundTripMs: 1 });
    // Slower samples that agree with it, within their bounds.
    for (let i = 0; i < CLOCK_SAMPLES - 1; i++) clock.add({ offsetMs: 3, roundTripMs: 10 });
    expect(clock.offsetMs()).toBe(0);
    clock.add({ offsetMs: 3, roundTripMs: 10 });
    expect(clock.offsetMs()).toBe(3);
  });

  it('takes a stepped clock at once: a sample whose bounds miss the best one drops the rest', () => {
    const clock = new ServerClock();
    clock.add({ offsetMs: 0, roundTripMs: 1 });
    clock.add({ offsetMs: 60_000, roundTripMs: 4 });
    expect(clock.offsetMs()).toBe(60_000);
    // The dropped sample, quicker, does not come back.
    clock.add({ offsetMs: 60_001, roundTripMs: 6 });
    expect(clock.offsetMs()).toBe(60_000);
  });

  it('starts afresh after reset', () => {
    const clock = new ServerClock();
    clock.add({ offsetMs: 7, roundTripMs: 1 });
    clock.reset();
    expect(clock.offsetMs()).toBe(0);
    clock.add({ offsetMs: 9, roundTripMs: 30 });
    expect(clock.offsetMs()).toBe(9);
  });
});
