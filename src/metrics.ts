/**
 * Metric signals: what a component reports about its own work (a reconcile pass took 12 ms, a
 * finalize lease was renewed) without knowing about Prometheus. The HTTP server's metrics
 * (src/backend/backend-metrics.ts) listen here; with no listener a signal costs a Set walk.
 *
 * Everything the event stream already says (publishes, requeues, recoveries) is counted from
 * applied events instead, so components need no line of metrics code for it.
 *
 * @module
 */

/** One signal; `nodeId` tells apart the backends that share a process (tests). */
export type MetricSignal =
  | { kind: 'reconcile-pass'; nodeId: string; ms: number; full: boolean }
  | { kind: 'lease-renewal'; nodeId: string }
  /** The finalizer pool paused for its unreachable results sink (`paused`), or resumed. */
  | { kind: 'sink-pause'; nodeId: string; paused: boolean }
  /**
   * A task left a state, moved by this backend's own write (never by a fold, so one move is
   * reported once across the fleet): `queue` Published to Running, `run` Running to
   * Finalizing, `finalize` Finalizing to Succeeded; `tag` is the attempt's.
   */
  | { kind: 'task-stage'; nodeId: string; stage: TaskStage; tag: string; ms: number }
  /** A full sweep ended: what it found and fixed, as flat counts (sweep.ts `summaryOf`). */
  | { kind: 'sweep'; nodeId: string; counts: Record<string, number | string | null> };

/** The stages of an attempt whose durations are measured. */
export type TaskStage = 'queue' | 'run' | 'finalize';

type Listener = (signal: MetricSignal) => void;

const listeners = new Set<Listener>();

/** Reports a signal to every listener; a listener's error never reaches the caller. */
export function signalMetric(signal: MetricSignal): void {
  for (const l of listeners) {
    try {
      l(signal);
    } catch (_err: unknown) {
      // Metrics must never break the work they measure.
    }
  }
}

/** Listens to every signal; returns the unsubscribe function. */
export function onMetricSignal(listener: Listener): () => void {
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}
