/**
 * The size limits of DESIGN.md sections 6 and 9, in one place so that the worker, the client
 * and the backend refuse the same things with the same words. Each message names the
 * variable that sets the limit and what to do instead.
 *
 * @module
 */
import { ValidationError } from '../actors/errors.js';
import { formatSize } from './duration.js';
import { nestsDeeperThan } from './json-depth.js';

/** A `submit.tasks` chunk: at most this many tasks... */
export const SUBMIT_CHUNK_MAX_TASKS = 1000;
/** ...and at most this many bytes of JSON. */
export const SUBMIT_CHUNK_MAX_BYTES = 512 * 1024;

/** The size of a task input as it travels: its JSON, in bytes. Absent input is 0. */
export const inputBytes = (input: unknown): number =>
  input === undefined ? 0 : Buffer.byteLength(JSON.stringify(input), 'utf8');

/**
 * A task input may nest arrays and objects at most this many levels (`{"a":[1]}` is 2). Far
 * above what a real input needs, far below where `JSON.stringify` overflows the stack (a few
 * thousand levels), which every serialization of the task (envelope, dispatch message,
 * snapshot) would otherwise hit.
 */
export const MAX_INPUT_DEPTH = 64;

/** The problem with an input nested too deep, or null. Iterative: any depth is safe to check. */
export function inputDepthProblem(input: unknown): string | null {
  if (!nestsDeeperThan(input, MAX_INPUT_DEPTH)) return null;
  return `nests arrays and objects more than ${MAX_INPUT_DEPTH} levels deep: flatten it or pass a reference instead`;
}

/** The problem with an input of `bytes`, or null when it fits under `maxInputBytes`. */
export function inputSizeProblem(bytes: number, maxInputBytes: number): string | null {
  if (bytes <= maxInputBytes) return null;
  return `is ${bytes} bytes of JSON, over SONAR_MAX_INPUT (${formatSize(maxInputBytes)}): pass a reference to larger data instead`;
}

/** The problem with an output of `bytes`, or null when it fits under `maxOutputBytes`. */
export function outputSizeProblem(bytes: number, maxOutputBytes: number): string | null {
  if (bytes <= maxOutputBytes) return null;
  return `is ${bytes} bytes, over SONAR_MAX_OUTPUT (${formatSize(maxOutputBytes)})`;
}

/** Throws a ValidationError at `path` when an output is over SONAR_MAX_OUTPUT. */
export function assertOutputSize(path: string, bytes: number, maxOutputBytes: number): void {
  const problem = outputSizeProblem(bytes, maxOutputBytes);
  if (problem === null) return;
  const message = `'${path}' ${problem}`;
  throw new ValidationError(message, [{ path, message: problem }]);
}
