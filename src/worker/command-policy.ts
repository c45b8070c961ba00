import { posix } from 'node:path';
import { ValidationError } from '../../actors/errors.js';
import type { Logger } from '../log.js';
import { NonRetryableError } from './errors.js';
import type { TaskHandler } from './options.js';

/**
 * Which task `command`s a worker accepts (`SONAR_WORKER_COMMANDS`, the worker option
 * `commands`). A client that may submit can put any argv in a task, and every worker serving
 * the task's tags would run it: this is the worker's own say in that.
 *
 * - `any`: every command (the behaviour before the setting existed);
 * - `none`: no task may carry a command; the worker runs only its own handler (the SDK's
 *   `handler`, or the CLI's `-- CMD`);
 * - `allow`: a task's `command[0]` must be exactly one of `executables` (absolute paths, or
 *   names looked up on the worker's PATH). Arguments are not judged.
 */
export type CommandPolicy =
  { kind: 'any' } | { kind: 'none' } | { kind: 'allow'; executables: readonly string[] };

/** The option's user form: `'any'`, `'none'`, a comma-separated list, or a list. */
export type CommandsOption = 'any' | 'none' | (string & {}) | readonly string[];

/** The setting's name in messages: operators set the variable, SDK users the option. */
export const COMMANDS_SETTING = 'SONAR_WORKER_COMMANDS';

const show = (value: unknown): string => JSON.stringify(value);

/** `any` and `none` in any case, so `NONE` is not taken for an executable's name. */
const keyword = (value: string): 'any' | 'none' | null => {
  const k = value.trim().toLowerCase();
  return k === 'any' || k === 'none' ? k : null;
};

/**
 * Why one allow-list entry is refused, or null. A name has no `/`; a path is absolute and in
 * its normal form: the match is exact, so each executable has one spelling to allow.
 */
function entryProblem(entry: string): string | null {
  if (entry === '') return 'is empty';
  if (entry.trim() !== entry) return 'has spaces around it';
  if (keyword(entry) !== null) return `cannot be in a list (${keyword(entry)} stands alone)`;
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(entry)) return 'has a control character';
  if (!entry.includes('/')) return null;
  if (!entry.startsWith('/')) return 'is neither a name (no /) nor an absolute path';
  if (posix.normalize(entry) !== entry || entry.endsWith('/')) {
    return `is not a normal absolute path (e.g. ${posix.normalize(entry).replace(/(.)\/$/, '$1')})`;
  }
  return null;
}

/**
 * Parses `SONAR_WORKER_COMMANDS`: `any`, `none`, or a comma-separated allow-list.
 *
 * @throws ValidationError whose message starts with the value, e.g. `"bin/sh" is not a command
 *   setting: entry "bin/sh" is neither a name (no /) nor an absolute path (...)`; the caller
 *   names the variable or field before it.
 */
export function parseCommandPolicy(raw: string): CommandPolicy {
  const k = keyword(raw);
  if (k !== null) return { kind: k };
  const entries = raw.split(',').map((e) => e.trim());
  entries.forEach((e, i) => {
    const problem = entryProblem(e);
    if (problem === null) return;
    const what = e === '' ? `entry ${i + 1}` : `entry ${show(e)}`;
    throw new ValidationError(
      `${show(raw)} is not a command setting: ${what} ${problem} (expected any, none, or a comma-separated list of absolute paths or names)`,
    );
  });
  return { kind: 'allow', executables: [...new Set(entries)] };
}

/**
 * Resolves the worker option `commands` (default `any`).
 *
 * @throws ValidationError naming the field and the value, e.g.
 *   `'commands.0' "bin/sh" is neither a name (no /) nor an absolute path`.
 */
export function resolveCommandPolicy(option: CommandsOption | undefined): CommandPolicy {
  if (option === undefined) return { kind: 'any' };
  const refuse = (path: string, message: string): never => {
    throw new ValidationError(`'${path}' ${message}`, [{ path, message }]);
  };
  if (typeof option === 'string') {
    try {
      return parseCommandPolicy(option);
    } catch (err: unknown) {
      return refuse('commands', err instanceof Error ? err.message : String(err));
    }
  }
  if (!Array.isArray(option)) {
    return refuse('commands', `must be 'any', 'none' or a list, got ${show(option)}`);
  }
  const entries = option as readonly unknown[];
  if (entries.length === 0) {
    return refuse('commands', "is an empty list: use 'none' to refuse every task command");
  }
  entries.forEach((e, i) => {
    if (typeof e !== 'string') refuse(`commands.${i}`, `must be a string, got ${show(e)}`);
    const problem = entryProblem(e as string);
    if (problem !== null) refuse(`commands.${i}`, `${show(e)} ${problem}`);
  });
  return { kind: 'allow', executables: [...new Set(entries as string[])] };
}

/** The setting as an operator writes it: `none`, `any`, `/bin/sh,python3`. */
export function formatCommandPolicy(policy: CommandPolicy): string {
  return policy.kind === 'allow' ? policy.executables.join(',') : policy.kind;
}

/** A value cut to `max` characters: a refusal must stay readable whatever the task sent. */
const clip = (s: string, max = 200): string => (s.length > max ? `${s.slice(0, max)}...` : s);

/**
 * Why `policy` refuses a task's command, or null when it may run. A task without a command
 * is never refused: it runs the worker's own handler.
 */
export function commandRefusal(
  policy: CommandPolicy,
  command: readonly string[] | undefined,
): string | null {
  if (command === undefined || policy.kind === 'any') return null;
  const setting = `${COMMANDS_SETTING}=${clip(formatCommandPolicy(policy))}`;
  if (policy.kind === 'none') {
    return `task command ${clip(show(command))} refused: this worker runs no task commands (${setting})`;
  }
  const file = command[0] ?? '';
  if (policy.executables.includes(file)) return null;
  return `task command ${clip(show(command))} refused: ${clip(show(file))} is not allowed by this worker (${setting})`;
}

/**
 * Wraps a handler so that a task whose command the policy refuses fails for good before the
 * handler is called: nothing runs. Non-retryable, so the task ends Failed at once instead of
 * being retried on workers that would refuse it again.
 */
export function guardCommands(
  handler: TaskHandler,
  policy: CommandPolicy,
  log?: Logger,
): TaskHandler {
  if (policy.kind === 'any') return handler;
  return (input, ctx) => {
    const refusal = commandRefusal(policy, ctx.command);
    if (refusal !== null) {
      // The backend records the error; the log tells the worker's operator who was refused.
      log?.warn('task command refused', { runId: ctx.runId, taskId: ctx.taskId, refusal });
      throw new NonRetryableError(refusal);
    }
    return handler(input, ctx);
  };
}
