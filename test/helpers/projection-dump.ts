import type { Projection } from '../../actors/projection.js';

/**
 * A projection as plain data with every Map and Set turned into an array in iteration
 * order, so `toStrictEqual` compares order too (the reconciler walks steps and tasks in
 * creation order) and undefined-valued keys.
 */
export function dumpProjection(p: Projection) {
  return {
    tasks: [...p.tasks],
    steps: [...p.steps],
    runs: [...p.runs],
    workers: [...p.workers],
    schedules: [...p.schedules],
    stepTasks: [...p.stepTasks],
    tasksByState: Object.entries(p.tasksByState).map(([state, keys]) => [state, [...keys]]),
    stepIndex: [...p.stepIndex].map(([key, i]) => [
      key,
      {
        counts: i.counts,
        order: [...i.order],
        fresh: [...i.fresh],
        returned: [...i.returned],
        pendingTags: [...i.pendingTags],
        // Lanes by priority, not by when each was first filed: that differs after a restore.
        lanes: [...i.lanes]
          .sort(([a], [b]) => (a ?? -Infinity) - (b ?? -Infinity))
          .map(([priority, keys]) => [priority, [...keys]]),
        timed: i.timed.entries(),
      },
    ]),
    activeSteps: [...p.activeSteps],
    activeRuns: [...p.activeRuns],
    expiredRuns: [...p.expiredRuns],
    workersInService: [...p.workersInService],
    publishTimes: [...p.publishTimes].map(([tag, times]) => [tag, [...times]]),
    leader: p.leader,
    lastSeq: p.lastSeq,
  };
}
