import { ErrorCode, SonarError, isSonarError } from '../../actors/errors.js';
import { isConfigError, processEnvironment } from '../config.js';

/** A usage mistake: exit 2, like a validation error. */
export class UsageError extends SonarError {
  override readonly name = 'UsageError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Validation, message, {}, options);
  }
}

/**
 * A command that already printed its outcome (e.g. `submit --wait` on a failed run, with
 * `--json` on stdout) ends with this: `sonar: <message>` on stderr, no JSON error, the code.
 */
export class CommandFailed extends Error {
  override readonly name = 'CommandFailed';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** Exit codes: 2 for usage or validation, 1 for everything else (STYLE C6). */
export function exitCodeOf(err: unknown): number {
  if (err instanceof CommandFailed) return err.exitCode;
  if (err instanceof UsageError || isConfigError(err)) return 2;
  if (isSonarError(err, ErrorCode.Validation)) return 2;
  return 1;
}

/** Prints `sonar: <message>` (and `--json` callers get the wire shape on stdout). */
export function reportError(err: unknown, json = false): number {
  const message = err instanceof Error ? err.message : String(err);
  if (json && !(err instanceof CommandFailed)) {
    const code = isSonarError(err)
      ? err.code
      : exitCodeOf(err) === 2
        ? 'validation'
        : 'unavailable';
    const details = isSonarError(err) ? err.details : {};
    process.stdout.write(`${JSON.stringify({ error: { code, message, details } })}\n`);
  }
  process.stderr.write(`sonar: ${message}\n`);
  if (processEnvironment.debug() && err instanceof Error && err.stack) {
    process.stderr.write(`${err.stack}\n`);
  }
  return exitCodeOf(err);
}

/** Writes text to stdout, waiting when the pipe is full so huge exports stay bounded. */
export async function writeOut(text: string): Promise<void> {
  if (process.stdout.write(text)) return;
  await new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => {
      process.stdout.off('drain', done);
      process.stdout.off('error', done);
      if (err) reject(err);
      else resolve();
    };
    process.stdout.once('drain', done);
    process.stdout.once('error', done);
  });
}

export const isTty = (): boolean => Boolean(process.stdout.isTTY) && !processEnvironment.noColor();

const codes = { dim: 2, red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36 } as const;
export type Color = keyof typeof codes;

export const paint = (on: boolean, color: Color, text: string): string =>
  on ? `\u001b[${codes[color]}m${text}\u001b[0m` : text;
