/**
 * The simulation's checks of per-tag rate limits, kept from the publishes the simulated
 * backend carried out, not from the projection or actors/reconciler's bucket: a bug in the
 * planner's counting cannot hide behind the same bug here.
 */
import type { Projection } from '../../actors/projection.js';
import type { Decisions } from '../../actors/reconciler/decisions.js';
import type { TagRates } from '../../actors/reconciler/tag-rates.js';

export class RateWatch {
  /** Per rate-limited tag, the publish times still inside its window, oldest first. */
  private readonly recent = new Map<string, number[]>();

  constructor(private readonly rates: TagRates) {}

  /**
   * Files the tick's publishes at `now`, then checks that no rate-limited tag has more than
   * its burst inside any window: all publishes fall on tick times, so the fullest window ends
   * at a publish, and checking the window ending now after each tick covers every one.
   */
  check(d: Decisions, now: number): string[] {
    const out: string[] = [];
    for (const { tag } of d.publish) {
      if (!this.rates[tag]) continue;
      let times = this.recent.get(tag);
      if (!times) this.recent.set(tag, (times = []));
      times.push(now);
    }
    for (const [tag, times] of this.recent) {
      const { burst, windowMs, text } = this.rates[tag]!;
      while (times.length > 0 && times[0]! <= now - windowMs) times.shift();
      if (times.length > burst) {
        out.push(`tag ${tag}: ${times.length} publishes within ${windowMs} ms, over ${text}`);
      }
    }
    return out;
  }
}

/**
 * A step listed starved has no eligible worker for any tag its Pending tasks name: a step
 * that waits only for its tag's rate (or capacity) never is.
 */
export function checkStarvedHaveNoWorker(
  p: Projection,
  d: Decisions,
  eligibleTags: ReadonlyMap<string, number>,
): string[] {
  const out: string[] = [];
  for (const key of d.starved) {
    for (const tag of p.stepIndex.get(key)?.pendingTags.keys() ?? []) {
      if (eligibleTags.has(tag)) out.push(`${key} starved, but ${tag} has an eligible worker`);
    }
  }
  return out;
}
