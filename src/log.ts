/**
 * Logging (STYLE.md C7): a small `Logger` interface and a pino adapter writing JSON lines to
 * stderr, since stdout is reserved for `--json` and `tail`.
 *
 * @module
 */
import { pino } from 'pino';
import { ValidationError } from '../actors/errors.js';
import { loadProcessSetting } from './config.js';
import { logLevel, logLevels } from './config-parsers.js';
import type { LogLevel } from './config-parsers.js';

/** Fields a log line may carry, e.g. `runId taskId attemptId workerId subject seq`. */
export type LogMeta = Record<string, unknown>;

/** What Sonar logs through. Messages are short lowercase facts (`task requeued`). */
export interface Logger {
  debug(msg: string, meta?: LogMeta): void;
  info(msg: string, meta?: LogMeta): void;
  warn(msg: string, meta?: LogMeta): void;
  error(msg: string, meta?: LogMeta): void;
  /** A logger whose lines all carry `bindings`, e.g. `{ component: 'reconciler' }`. */
  child(bindings: LogMeta): Logger;
}

/** Levels accepted by {@link createLogger}, quietest last. */
export { logLevels };
export type { LogLevel };

/** Where log lines go: stderr, or any sink taking one JSON line per call (tests). */
export type LogDestination = 'stderr' | { write(line: string): void };

export interface LoggerOptions {
  /**
   * The lowest level written.
   * @defaultValue `SONAR_LOG_LEVEL`, else `info`
   */
  level?: string;
  /**
   * Bound as `component` on every line (`reconciler`, `finalizer`, `worker`, …).
   * @defaultValue unset
   */
  component?: string;
  /**
   * @defaultValue `stderr`
   */
  destination?: LogDestination;
}

/**
 * A pino-backed {@link Logger} writing JSON lines (`level`, `time`, `msg`, bindings, meta).
 * Errors under `err` or `error` are serialized with their message, type and stack.
 *
 * @throws ValidationError when the level is unknown, e.g. `"loud" is not a log level (one of
 * trace, debug, info, warn, error, fatal, silent)`; a ConfigError naming `SONAR_LOG_LEVEL`
 * when the level came from there.
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const level: LogLevel =
    opts.level === undefined
      ? (loadProcessSetting('SONAR_LOG_LEVEL') ?? 'info')
      : levelOf(opts.level);
  const destination = opts.destination ?? 'stderr';
  const base = pino(
    {
      level,
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: { err: pino.stdSerializers.err, error: pino.stdSerializers.err },
      formatters: { level: (label) => ({ level: label }) },
    },
    // Synchronous, so the lines written just before a process exits are not lost.
    destination === 'stderr' ? pino.destination({ fd: 2, sync: true }) : destination,
  );
  return adapt(opts.component === undefined ? base : base.child({ component: opts.component }));
}

/** An explicit level, parsed as the `SONAR_LOG_LEVEL` row parses one. */
function levelOf(level: string): LogLevel {
  try {
    return logLevel(level);
  } catch (err: unknown) {
    throw new ValidationError(err instanceof Error ? err.message : String(err));
  }
}

function adapt(p: pino.Logger): Logger {
  return {
    debug: (msg, meta) => (meta === undefined ? p.debug(msg) : p.debug(meta, msg)),
    info: (msg, meta) => (meta === undefined ? p.info(msg) : p.info(meta, msg)),
    warn: (msg, meta) => (meta === undefined ? p.warn(msg) : p.warn(meta, msg)),
    error: (msg, meta) => (meta === undefined ? p.error(msg) : p.error(meta, msg)),
    child: (bindings) => adapt(p.child(bindings)),
  };
}

const noop = (): void => {};

/** Discards everything (library default, tests). */
export const silentLogger: Logger = {
  debug: noop,
  info: noop,
  warn: noop,
  error: noop,
  child: () => silentLogger,
};
