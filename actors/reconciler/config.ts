import type { TagRates } from './tag-rates.js';

/**
 * The reconciler's judgement settings (DESIGN.md sections 4, 5 and 8). Every field is a flag
 * of `sonar plan` and an option of the backend; durations are milliseconds.
 */
export interface PlanConfig {
  /**
   * A Published task no worker started for more than this goes back to Pending.
   * @defaultValue 600000 (10 min, `SONAR_PUBLISH_TIMEOUT`)
   */
  publishTimeoutMs: number;
  /**
   * A Running task whose worker is not live goes back to Pending once it has run more than this.
   * @defaultValue 600000 (10 min, `SONAR_ORPHAN_AGE`)
   */
  orphanAgeMs: number;
  /**
   * Counted (`worker-lost`) recoveries within the window, this one included, at which a task
   * goes Dead instead of Pending.
   * @defaultValue 3 (`SONAR_RECOVERY_LIMIT`)
   */
  recoveryLimit: number;
  /**
   * The window recoveries are counted in, back from `now` (a recovery at exactly the edge is out).
   * @defaultValue 259200000 (72 h, `SONAR_RECOVERY_WINDOW`)
   */
  recoveryWindowMs: number;
  /**
   * Capacity = floor(multiplier x slots of eligible workers); may be fractional.
   * @defaultValue 1 (`SONAR_CAPACITY_MULTIPLIER`)
   */
  capacityMultiplier: number;
  /**
   * Tasks one step places per turn of the round-robin (bounds a turn, not a tick).
   * @defaultValue 8 (`SONAR_DISPATCH_BATCH`)
   */
  batch: number;
  /**
   * A pulse is recent while `now - pulseAt <= pulseTtlMs`; only workers with a recent pulse
   * are eligible for placement.
   * @defaultValue 15000 (15 s, `SONAR_PULSE_TTL`)
   */
  pulseTtlMs: number;
  /**
   * Whether the reconciler has watched the registry for one full pulse TTL since it (re)started.
   * Until then no task is judged orphaned by a missing key and no worker is judged lost: a key
   * may be missing only because its worker has not had a chance to pulse since. `sonar plan`
   * takes it as passed.
   * @defaultValue true
   */
  ageFloorPassed: boolean;
  /**
   * The starvation guard of priorities: a priority level ranks one higher for every this long
   * that its longest-waiting due task has waited (actors/reconciler/priority-order.ts); 0 turns
   * aging off (strict priorities). Unused while every task has the same priority.
   * @defaultValue 60000 (1 min, `SONAR_PRIORITY_AGING`)
   */
  priorityAgingMs?: number;
  /**
   * Per-tag rate limits: at most `burst` publishes to a tag in any `windowMs`, counted from the
   * projection's `TaskPublished` times (actors/reconciler/tag-rates.ts). A tag not listed is
   * not limited; absent: none is.
   * @defaultValue none (`SONAR_TAG_RATES`)
   */
  tagRates?: TagRates;
  /**
   * How long the deciding backend has been in steady contact with the server (connected,
   * JetStream answering). A Published task's wait counts from then at the earliest: while the
   * server was away no worker could start it, so an outage longer than the publish timeout
   * does not requeue every task it caught Published. Absent: contact taken as always held
   * (`sonar plan`, the sweep).
   */
  steadyContactMs?: number;
  /**
   * The dispatch consumer's ack_wait, read with {@link PlanConfig.steadyContactMs}. A task
   * Published before steady contact began may have its message in doubt: delivered to a
   * worker that lost it in the break, or restored pending by a restarted server. The server
   * hands it out again only once ack_wait passes, so such a task's wait counts from ack_wait
   * into steady contact: the publish timeout never races the redelivery.
   */
  dispatchAckWaitMs?: number;
}

export const DEFAULT_PLAN_CONFIG: Readonly<PlanConfig & { priorityAgingMs: number }> = {
  publishTimeoutMs: 10 * 60_000,
  orphanAgeMs: 10 * 60_000,
  recoveryLimit: 3,
  recoveryWindowMs: 72 * 3_600_000,
  capacityMultiplier: 1,
  batch: 8,
  pulseTtlMs: 15_000,
  ageFloorPassed: true,
  priorityAgingMs: 60_000,
};

/** The defaults with `overrides` on top (undefined fields are ignored). */
export function resolvePlanConfig(overrides: Partial<PlanConfig> = {}): PlanConfig {
  const out: PlanConfig = { ...DEFAULT_PLAN_CONFIG };
  for (const [k, v] of Object.entries(overrides)) {
    if (v !== undefined) (out as unknown as Record<string, unknown>)[k] = v;
  }
  return out;
}
