import type { AggregateRef, EventData, SonarEventType } from '../events.js';

/** Why a task goes back to Pending on the reconciler's judgement (DESIGN.md section 4). */
export type RequeueReason = 'publish-timeout' | 'worker-lost' | 'worker-released';

/** Capacity left after the tick's requeues and deaths, before its placements; never negative. */
export interface CapacityView {
  global: number;
  /** One entry per tag advertised by an eligible worker, in tag name order. */
  tags: Record<string, number>;
  /** One entry per Ready step with `maxConcurrent`, keyed `<runId>.<stepId>`. */
  steps: Record<string, number>;
}

/**
 * One tick's decisions, exactly the shape `sonar plan --json` prints (DESIGN.md section 8).
 * Tasks are named `<runId>.<taskId>`, steps `<runId>.<stepId>`. Every list is ordered:
 * the same inputs give the same bytes.
 */
export interface Decisions {
  requeue: { task: string; reason: RequeueReason }[];
  dead: { task: string }[];
  publish: { task: string; tag: string }[];
  starved: string[];
  capacity: CapacityView;
  /**
   * Delayed tasks (Pending, a notBefore still to come) per Ready step with any, in creation
   * order. Absent when there are none, so that a plan without delays prints as it always did.
   */
  delayed?: Record<string, number>;
  /**
   * Per rate-limited tag advertised by an eligible worker, in tag name order: its rate as
   * written and the publishes its bucket allowed this tick, before its placements (like
   * `capacity`). Absent when no such tag, so that a plan without rate limits prints as it
   * always did.
   */
  rateLimited?: Record<string, { rate: string; left: number }>;
}

/**
 * An event the reconciler has decided to append. `seq` is the aggregate's sequence when it
 * was judged: the write must expect exactly it, so a decision taken on a state that has since
 * moved is dropped and judged again next tick, never forced through.
 */
export type ReconcilerEvent = {
  [T in SonarEventType]: { ref: AggregateRef; type: T; data: EventData<T>; seq: number };
}[SonarEventType];

/** Builds a ReconcilerEvent; the helper keeps `type` and `data` checked against each other. */
export const reconcilerEvent = <T extends SonarEventType>(
  ref: AggregateRef,
  type: T,
  data: EventData<T>,
  seq: number,
): ReconcilerEvent => ({ ref, type, data, seq }) as ReconcilerEvent;
