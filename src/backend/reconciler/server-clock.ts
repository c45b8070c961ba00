/** One clock sample: server time minus the local midpoint of a round trip, and that trip. */
export interface ClockSample {
  offsetMs: number;
  roundTripMs: number;
}

/** How many recent samples the estimate is chosen from. */
export const CLOCK_SAMPLES = 8;

/**
 * The server's clock as seen from this process. A sample's error is at most half its round
 * trip, and a loaded machine stretches some trips to seconds (an event loop that handles the
 * reply late, a server slow to answer): taking each sample as it comes would move the
 * leader's clock by that much for a tick, and with it every rate window and age it judges.
 * So the estimate is the offset of the quickest of the recent samples, as NTP does; keeping
 * only recent ones lets a stepped server clock show through within a few ticks.
 */
export class ServerClock {
  private readonly samples: ClockSample[] = [];
  private best: ClockSample | null = null;

  constructor(private readonly size = CLOCK_SAMPLES) {}

  add(sample: ClockSample): void {
    this.samples.push(sample);
    if (this.samples.length > this.size) this.samples.shift();
    this.best = this.samples.reduce((a, b) => (b.roundTripMs <= a.roundTripMs ? b : a));
  }

  /** Milliseconds to add to the local clock for the server's; 0 before any sample. */
  offsetMs(): number {
    return this.best?.offsetMs ?? 0;
  }
}
