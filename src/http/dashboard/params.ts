import { ValidationError } from '../../../actors/errors.js';
import { isEventType } from '../../../actors/events.js';
import { isId } from '../../../actors/ids.js';
import type { EventFilter } from './event-filter.js';

/** A path or query id, refused with the DESIGN.md id rule before anything is read. */
export function idParam(name: string, value: string | undefined): string {
  if (!isId(value)) {
    throw new ValidationError(
      `'${name}' must match ^[A-Za-z0-9_-]{1,64}$, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** `?run=&task=&type=` as `sonar tail` takes them; empty values mean no filter. */
export function filterParams(q: URLSearchParams): EventFilter {
  const filter: EventFilter = {};
  const run = q.get('run') || undefined;
  const task = q.get('task') || undefined;
  const type = q.get('type') || undefined;
  if (run !== undefined) filter.run = idParam('run', run);
  if (task !== undefined) filter.task = idParam('task', task);
  if (type !== undefined) {
    if (!isEventType(type))
      throw new ValidationError(`'type' is not an event type: ${JSON.stringify(type)}`);
    filter.type = type;
  }
  return filter;
}

/** A whole number in [1, max], or the default when absent. */
export function limitParam(
  q: URLSearchParams,
  name: string,
  fallback: number,
  max: number,
): number {
  const raw = q.get(name);
  if (raw === null || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    throw new ValidationError(
      `'${name}' must be a whole number from 1 to ${max}, got ${JSON.stringify(raw)}`,
    );
  }
  return Math.min(max, Number(raw));
}
