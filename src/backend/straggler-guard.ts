import { ErrorCode, SonarError } from '../../actors/errors.js';

/** A component was asked to start while the work of its last run is still finishing. */
export class StillStoppingError extends SonarError {
  override readonly name = 'StillStoppingError';
  constructor(readonly component: string) {
    super(
      ErrorCode.Conflict,
      `${component} cannot start: its last run is still finishing (a straggler left by a bounded stop); try again once it ends`,
      { component },
    );
  }
}

/**
 * Keeps a reference to a component's unfinished stop. A bounded stop (SONAR_STOP_GRACE) leaves
 * a slow part running rather than holding shutdown; this guard is how the component remembers
 * it, so that a restart refuses instead of running a second copy beside the straggler (two
 * finalizer lanes on one job, two sweeps, two reconcile loops in one process).
 */
export class StragglerGuard {
  private pending: Promise<unknown> | null = null;

  constructor(private readonly component: string) {}

  /** True while the last stop's work has not finished. */
  get straggling(): boolean {
    return this.pending !== null;
  }

  /** @throws StillStoppingError while the last run's work is unfinished. */
  assertIdle(): void {
    if (this.pending) throw new StillStoppingError(this.component);
  }

  /** Remembers `work` (a stop in progress) until it settles; returns it unchanged. */
  track<T>(work: Promise<T>): Promise<T> {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.pending = settled;
    void settled.then(() => {
      if (this.pending === settled) this.pending = null;
    });
    return work;
  }
}
