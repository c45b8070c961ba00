import { JsonStreamValidator } from '../storage/json-stream-validator.js';

/** What a handler returned, as an error message names it. */
function described(value: unknown, bytes: Uint8Array): string {
  if (value === undefined) return 'nothing (undefined)';
  if (value instanceof Uint8Array) return `${bytes.byteLength} bytes`;
  if (typeof value === 'string') {
    return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 37)}...` : value)})`;
  }
  return `a ${typeof value}`;
}

/**
 * Why `bytes` (from the handler's `value`) cannot be a `json` step's output, or null when it
 * can. The finalizer's own check (the same validator): a result refused there would poison
 * the task's finalization and block its step, for a slip the worker can name at once.
 */
export function jsonOutputProblem(value: unknown, bytes: Uint8Array): string | null {
  const validator = new JsonStreamValidator();
  try {
    validator.push(bytes);
    validator.end();
    return null;
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    return `the step's output is json, but the handler returned ${described(value, bytes)}, which is not JSON (${why}); return a value to serialize, or JSON text`;
  }
}
