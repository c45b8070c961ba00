import { isOfRun } from '../../../streams/jsonl.js';

/** The filters of the Events page and `/api/stream`, the same as `sonar tail`'s flags. */
export interface EventFilter {
  run?: string;
  task?: string;
  type?: string;
}

/**
 * Whether an event of `subject` and `type` passes: `task` alone matches that task id in any
 * run (as `sonar tail --task` does); with `run` it is exactly one task.
 */
export function matchesFilter(subject: string, type: unknown, f: EventFilter): boolean {
  if (f.type !== undefined && type !== f.type) return false;
  if (f.run !== undefined && !isOfRun(subject, f.run)) return false;
  if (f.task !== undefined) {
    const t = subject.split('.');
    if (t[2] !== 'task' || t[4] !== f.task) return false;
  }
  return true;
}
