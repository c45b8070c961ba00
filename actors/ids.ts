import { ValidationError } from './errors.js';

/** Ids and tags (DESIGN.md section 2): anything else is refused before anything is written. */
export const ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

export const isId = (value: unknown): value is string =>
  typeof value === 'string' && ID_RE.test(value);

/** Throws a ValidationError naming the field and the bad value. */
export function assertId(field: string, value: unknown): asserts value is string {
  if (!isId(value)) {
    const message = `'${field}' must match ${String(ID_RE)}, got ${JSON.stringify(value)}`;
    throw new ValidationError(message, [{ path: field, message }]);
  }
}

/** The projection key of a task or step: `<runId>.<id>`. */
export const keyOf = (runId: string, id: string): string => `${runId}.${id}`;
