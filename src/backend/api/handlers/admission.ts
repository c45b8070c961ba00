import { ErrorCode, SonarError } from '../../../../actors/errors.js';
import type { Projection } from '../../../../actors/projection.js';

/** Tasks not yet settled: they hold memory in every backend and work in the fleet. */
export function openTaskCount(p: Projection): number {
  const s = p.tasksByState;
  // Poisoned is open in the projection's sense (not terminal) but settled (DESIGN.md
  // section 3): it waits for an operator, not for the fleet.
  return s.Pending.size + s.Published.size + s.Running.size + s.Finalizing.size;
}

/** A submit refused because the open work is at `SONAR_MAX_OPEN_TASKS`. */
export class OverloadedError extends SonarError {
  override readonly name = 'OverloadedError';
  constructor(
    readonly open: number,
    readonly adding: number,
    readonly limit: number,
  ) {
    super(
      ErrorCode.Overloaded,
      `submit refused: ${open} tasks are open and this run adds ${adding}, over ` +
        `SONAR_MAX_OPEN_TASKS (${limit}): submit again once open tasks have settled, or raise ` +
        `SONAR_MAX_OPEN_TASKS on the backends`,
      { open, adding, limit, setting: 'SONAR_MAX_OPEN_TASKS' },
    );
  }
}

/**
 * Admission control at `submit.begin`: refuses a run whose tasks not yet created would take
 * the open tasks over `limit`. Decided once, at begin: a run admitted there is never refused
 * halfway, since a half-written submit would hold its tasks open and never run them. Two
 * begins on two backends at the same moment may both be admitted, so the bound can be passed
 * by the runs begun together; it bounds memory, it is not a quota.
 *
 * @param created tasks of this run already in the projection (a submit being completed).
 * @throws OverloadedError
 */
export function admit(p: Projection, taskCount: number, created: number, limit: number): void {
  const adding = taskCount - created;
  if (adding <= 0) return;
  const open = openTaskCount(p);
  if (open + adding > limit) throw new OverloadedError(open, adding, limit);
}
