/**
 * Placement priority (docs/run-file.md): an integer on a step, and optionally on a task, whose
 * own value wins. Higher goes first; see actors/reconciler/priority-order.ts for the order.
 */
export const PRIORITY_MIN = -100;
export const PRIORITY_MAX = 100;
/** A step without `priority`, and the task of such a step without its own. */
export const DEFAULT_PRIORITY = 0;
