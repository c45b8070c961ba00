import { ValidationError } from '../errors.js';
import { ID_RE } from '../ids.js';

/**
 * How many recent `TaskPublished` times the projection keeps per tag, and so the largest burst
 * a rate may have: a bucket must see every publish that still holds one of its tokens.
 */
export const RATE_HISTORY = 10_000;

/**
 * The longest window a rate may have: the projection forgets publish times older than this
 * (behind the newest one of their tag), so a longer window could not be counted.
 */
export const MAX_RATE_WINDOW_MS = 3_600_000;

/**
 * One tag's rate limit, as the bucket applies it: at most `burst` publishes to the tag in any
 * window of `windowMs` (a publish at `t` holds one token until `t + windowMs`, exclusive).
 * `burst` 0 closes the tag: nothing is published to it.
 */
export interface TagRate {
  burst: number;
  windowMs: number;
  /** As the operator wrote it (e.g. `20/s`): what `plan` and the logs show. */
  text: string;
}

/** Rates by tag; a tag not listed is not limited. */
export type TagRates = Readonly<Record<string, TagRate>>;

const PERIODS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const RATE_RE = /^(\d+(?:\.\d+)?)\/(\d+(?:\.\d+)?)?(ms|s|m|h)$/;

/**
 * One rate, `<count>/<period>`: a count (a decimal, 0 allowed) per `s`, `m`, `h`, or a period
 * with a figure (`40/2s`, `5/500ms`). The burst is the whole part of the count (at least 1) and
 * the window the time the rate takes to earn that burst, so the long-run rate is always the
 * one written: `20/s` is 20 in any 1 s, `40/2s` 40 in any 2 s, `0.5/s` 1 in any 2 s, `2.5/s`
 * 2 in any 800 ms, `1/m` 1 in any minute. `0/s` closes the tag. Throws the problem, worded to
 * follow the value it is about.
 */
export function parseTagRate(text: string): TagRate {
  const m = RATE_RE.exec(text);
  if (!m)
    throw new ValidationError('is not a rate: count/period (e.g. api=20/s, 1/m, 0.5/s, 40/2s)');
  const count = Number(m[1]);
  const periodMs = (m[2] === undefined ? 1 : Number(m[2])) * PERIODS_MS[m[3]!]!;
  if (periodMs <= 0) throw new ValidationError('has a period of 0 (e.g. api=20/s)');
  if (count === 0) return { burst: 0, windowMs: periodMs, text };
  const burst = Math.max(1, Math.floor(count));
  if (burst > RATE_HISTORY) {
    throw new ValidationError(
      `allows a burst of ${burst}, more than the ${RATE_HISTORY} sonar can count: leave the tag out not to limit it, or write a shorter period`,
    );
  }
  // Rounded to whole ms so that the bucket compares integers; at least 1 ms.
  const windowMs = Math.max(1, Math.round((periodMs * burst) / count));
  if (windowMs > MAX_RATE_WINDOW_MS) {
    throw new ValidationError(
      `holds a token for ${windowMs} ms, longer than the 1h sonar can count (the slowest rate is 1/h)`,
    );
  }
  return { burst, windowMs, text };
}

/**
 * `SONAR_TAG_RATES` / `sonar plan --tag-rates`: `tag=rate` pairs separated by commas
 * (`api=20/s,gpu=1/m`); whitespace around items is ignored; empty means no limits. Throws a
 * message that starts with the bad item, quoted.
 */
export function parseTagRates(raw: string): TagRates {
  const out: Record<string, TagRate> = {};
  for (const item of raw.split(',')) {
    const trimmed = item.trim();
    if (trimmed === '') continue;
    const eq = trimmed.indexOf('=');
    const tag = eq === -1 ? '' : trimmed.slice(0, eq).trim();
    const bad = (problem: string) => new ValidationError(`${JSON.stringify(trimmed)} ${problem}`);
    if (!ID_RE.test(tag)) {
      throw bad('is not tag=rate, with a tag of letters, digits, _ or - (e.g. api=20/s)');
    }
    if (Object.hasOwn(out, tag)) throw bad(`gives tag ${tag} a second rate`);
    try {
      out[tag] = parseTagRate(trimmed.slice(eq + 1).trim());
    } catch (err: unknown) {
      throw bad((err as Error).message);
    }
  }
  return out;
}

/** The rates as written, `tag=rate` by tag name: what a leader announces and `plan` echoes. */
export function formatTagRates(rates: TagRates): string {
  return Object.keys(rates)
    .sort()
    .map((tag) => `${tag}=${rates[tag]!.text}`)
    .join(',');
}

/**
 * Publishes the bucket still allows at `now`: its burst less the publishes whose token has not
 * come back (those in the window `(now - windowMs, now]`, and any after `now`: a server clock
 * ahead of the planner's counts against the bucket, never for it). `times` is the tag's
 * recent publish times, ascending (the projection keeps them so). Reads at most `burst` of
 * them, from the newest.
 */
export function tokensLeft(
  times: readonly number[] | undefined,
  rate: TagRate,
  now: number,
): number {
  if (rate.burst === 0) return 0;
  if (!times) return rate.burst;
  const since = now - rate.windowMs;
  let held = 0;
  for (let i = times.length - 1; i >= 0 && held < rate.burst && times[i]! > since; i--) held++;
  return rate.burst - held;
}

/**
 * When the bucket's next token comes back, for a bucket empty at `now`: the oldest publish
 * still holding one, plus the window. Null when a token is left, or never (`0/...`).
 */
export function nextTokenAt(
  times: readonly number[] | undefined,
  rate: TagRate,
  now: number,
): number | null {
  if (rate.burst === 0 || !times || tokensLeft(times, rate, now) > 0) return null;
  return times[times.length - rate.burst]! + rate.windowMs;
}

/** What a pass did to one rate-limited tag, as {@link nextRatePassAt} needs it. */
export interface RatedTagAfterPass {
  rate: TagRate;
  /** The tag's publish times, this pass's own included, ascending. */
  times: readonly number[];
  /** Tokens the planner saw left when it planned (absent: it did not look at the tag). */
  leftWhenPlanned: number | undefined;
  /** What this pass published to the tag. */
  placed: number;
}

/**
 * When a leader should plan again for its rate-limited tags, sooner than its next tick: when
 * the first emptied bucket gets a token back, or `now` when a bucket the pass found empty has
 * one back already. That happens when a pass plans a moment before a token's return and ends
 * after it (a timer that fires a millisecond early, a pass that other events began): no
 * later wake would be due, and the tag would wait for the tick. Null when no bucket waits.
 */
export function nextRatePassAt(tags: readonly RatedTagAfterPass[], now: number): number | null {
  let wake = Infinity;
  for (const { rate, times, leftWhenPlanned, placed } of tags) {
    if (rate.burst === 0) continue;
    const at = nextTokenAt(times, rate, now);
    if (at !== null) wake = Math.min(wake, at);
    else if (leftWhenPlanned !== undefined && leftWhenPlanned <= placed) wake = Math.min(wake, now);
  }
  return wake === Infinity ? null : wake;
}
