import type { Logger } from '../../log.js';
import type { Projection } from '../../../actors/projection.js';
import type { ScheduleContext } from '../../../actors/schedule/schedule.machine.js';
import { runFileOf } from '../../schedules/run-template.js';
import { submitRunFile } from '../../run-submit.js';
import { ApiClient } from '../../worker/api-client.js';
import type { BackendContext } from '../context.js';

/** A submit that failed is tried again after this, not on every check. */
const RETRY_AFTER_MS = 10_000;

/**
 * Submits the runs that schedules fired, through the API like any client (the same checks,
 * admission and idempotence as `sonar submit`). A run's id and file are derived from the
 * fire, so whichever backend submits, and however often, it is one run: a leader killed
 * between appending `ScheduleFired` and finishing the submit leaves a run that is not whole,
 * and the next leader's {@link RunSubmitter.finishOpen} completes it.
 */
export class RunSubmitter {
  private readonly api: ApiClient;
  private readonly failedAt = new Map<string, number>();

  constructor(
    private readonly ctx: BackendContext,
    private readonly log: Logger,
  ) {
    this.api = new ApiClient(ctx.nc, ctx.names, { timeoutMs: 5_000 });
  }

  /** Submits one fired run; false (logged) when it failed, to be tried again later. */
  async submit(s: ScheduleContext, runId: string): Promise<boolean> {
    const last = this.failedAt.get(runId);
    if (last !== undefined && this.ctx.now() - last < RETRY_AFTER_MS) return false;
    try {
      await submitRunFile(this.api, runFileOf(runId, s.run), {
        maxInputBytes: this.ctx.config.maxInputBytes,
        chunkConcurrency: 4,
      });
      this.failedAt.delete(runId);
      this.log.info('scheduled run submitted', { schedule: s.name, runId });
      return true;
    } catch (err: unknown) {
      this.failedAt.set(runId, this.ctx.now());
      this.log.warn('scheduled run not submitted yet', { schedule: s.name, runId, err });
      return false;
    }
  }

  /** Submits every recent fire's run that the log does not hold whole. */
  async finishOpen(p: Projection, s: ScheduleContext): Promise<void> {
    for (const fire of s.recent) {
      if (fire.skipped !== null) continue;
      if (p.runs.has(fire.runId) || p.expiredRuns.has(fire.runId)) continue;
      await this.submit(s, fire.runId);
    }
  }
}
