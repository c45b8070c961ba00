/** One clock sample: server time minus the local midpoint of a round trip, and that trip. */
export interface ClockSample {
  offsetMs: number;
  roundTripMs: number;
}

/** How many recent samples the estimate is chosen from. */
export const CLOCK_SAMPLES = 8;

/** Millisecond timestamps on both sides: two samples' bounds may miss each other by this. */
const RESOLUTION_MS = 2;

/**
 * The server's clock as seen from this process. A sample's error is at most half its round
 * trip, and a loaded machine stretches some trips to seconds (an event loop that handles the
 * reply late, a server slow to answer): taking each sample as it comes would move the
 * leader's clock by that much for a tick, and with it every rate window and age it judges.
 * So the estimate is the offset of the quickest of the recent samples, as NTP does.
 *
 * The true offset lies within half a round trip of each sample. A sample whose bounds miss
 * the best one's can only mean that a clock stepped (NTP, a resumed VM): the samples before
 * it are dropped, so the step shows at once instead of when the older best ages out.
 */
export class ServerClock {
  private samples: ClockSample[] = [];
  private best: ClockSample | null = null;

  constructor(private readonly size = CLOCK_SAMPLES) {}

  add(sample: ClockSample): void {
    const best = this.best;
    const apart = best === null ? 0 : Math.abs(sample.offsetMs - best.offsetMs);
    if (best !== null && apart > (sample.roundTripMs + best.roundTripMs) / 2 + RESOLUTION_MS) {
      this.samples = [];
    }
    this.samples.push(sample);
    if (this.samples.length > this.size) this.samples.shift();
    this.best = this.samples.reduce((a, b) => (b.roundTripMs <= a.roundTripMs ? b : a));
  }

  /** Forgets every sample (a new term: the clocks may have moved while this process waited). */
  reset(): void {
    this.samples = [];
    this.best = null;
  }

  /** Milliseconds to add to the local clock for the server's; 0 before any sample. */
  offsetMs(): number {
    return this.best?.offsetMs ?? 0;
  }
}
