/**
 * What this build's planner honors beyond DESIGN.md's contract 1, announced by each leader in
 * its `ReconcilerElected`. An older leader folds a run file's `priority` and `notBefore`
 * without them (readers ignore unknown event fields) and would place by creation order at
 * once; so a backend refuses a submit that needs a field its current leader did not announce.
 */
export const PLANNER_HONORS = ['priority', 'delay'] as const;
export type PlannerHonors = (typeof PLANNER_HONORS)[number];
