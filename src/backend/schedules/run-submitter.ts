import type { Logger } from '../../log.js';
import type { ScheduleContext } from '../../../actors/schedule/schedule.machine.js';
import { runFileOf } from '../../schedules/run-template.js';
import { isSonarError } from '../../../actors/errors.js';
import { PERMANENT_REFUSALS } from '../../../actors/schedule/schedule.events.js';
import type { PermanentRefusal } from '../../../actors/schedule/schedule.events.js';
import { submitRunFile } from '../../run-submit.js';
import { ApiClient } from '../../worker/api-client.js';
import type { BackendContext } from '../context.js';

/** A submit that failed is tried again after this, not on every check. */
export const RETRY_AFTER_MS = 10_000;

/** What one submit came to. */
export type SubmitOutcome =
  | { kind: 'submitted' }
  /** Failed, to be tried again (`overloaded`, `store_full`, a timeout...), or not tried: too soon. */
  | { kind: 'failed' }
  | { kind: 'waiting' }
  /** Refused for good: no retry changes it. */
  | { kind: 'refused'; code: PermanentRefusal; message: string };

const isPermanent = (code: unknown): code is PermanentRefusal =>
  (PERMANENT_REFUSALS as readonly unknown[]).includes(code);

/**
 * Submits the runs that schedules fired, through the API like any client (the same checks,
 * admission and idempotence as `sonar submit`). A run's id and file are derived from the
 * fire, so whichever backend submits, and however often, it is one run: a leader killed
 * between appending `ScheduleFired` and finishing the submit leaves a run owed, and the next
 * leader submits it again (schedule-firer.ts).
 */
export class RunSubmitter {
  private readonly api: ApiClient;
  /** Runs whose last submit failed, and when: bounded by the runs schedules owe. */
  private readonly failedAt = new Map<string, number>();

  constructor(
    private readonly ctx: BackendContext,
    private readonly log: Logger,
  ) {
    this.api = new ApiClient(ctx.nc, ctx.names, { timeoutMs: 5_000 });
  }

  /** Whether a failed submit of this run is too recent to try again. */
  isWaiting(runId: string): boolean {
    const last = this.failedAt.get(runId);
    return last !== undefined && this.ctx.now() - last < RETRY_AFTER_MS;
  }

  /** Forgets the failures of every run not in `owed` (submitted since, by any backend). */
  retainOnly(owed: ReadonlySet<string>): void {
    for (const runId of this.failedAt.keys()) if (!owed.has(runId)) this.failedAt.delete(runId);
  }

  /** Submits one fired run; true when it is whole now (false: logged, to be tried again). */
  async submit(s: ScheduleContext, runId: string): Promise<boolean> {
    return (await this.attempt(s, runId)).kind === 'submitted';
  }

  /** Submits one fired run and says what came of it. */
  async attempt(s: ScheduleContext, runId: string): Promise<SubmitOutcome> {
    if (this.isWaiting(runId)) return { kind: 'waiting' };
    try {
      await submitRunFile(this.api, runFileOf(runId, s.run), {
        maxInputBytes: this.ctx.config.maxInputBytes,
        chunkConcurrency: 4,
      });
      this.failedAt.delete(runId);
      this.log.info('scheduled run submitted', { schedule: s.name, runId });
      return { kind: 'submitted' };
    } catch (err: unknown) {
      const code = isSonarError(err) ? err.code : undefined;
      if (isPermanent(code)) {
        this.failedAt.delete(runId);
        const message = (err as Error).message.slice(0, 1024);
        return { kind: 'refused', code, message };
      }
      // Warn once per run: a long outage must not log every retry of every owed run.
      const again = this.failedAt.has(runId);
      this.failedAt.set(runId, this.ctx.now());
      this.log[again ? 'debug' : 'warn']('scheduled run not submitted yet', {
        schedule: s.name,
        runId,
        err,
      });
      return { kind: 'failed' };
    }
  }
}
