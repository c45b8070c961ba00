import { PULL_MAX_EXPIRES_MS, PULL_MIN_EXPIRES_MS } from '../protocol.js';
import type { NatsConnection } from '@nats-io/transport-node';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ValidationError } from '../../actors/errors.js';
import { assertId } from '../../actors/ids.js';
import type { S3Config } from '../config.js';
import { parseDuration } from '../duration.js';
import { guardCommands, resolveCommandPolicy } from './command-policy.js';
import { routeHandler } from './handler-routing.js';
import type { CommandPolicy, CommandsOption } from './command-policy.js';
import type { Logger } from '../log.js';
import { createLogger } from '../log.js';
import { loadProcessSetting } from '../config.js';
import type { ConnectSettings } from '../nats.js';
import type { OutputStore } from '../storage/output-store.js';
import type { LogStream } from '../storage/task-logs.js';
import { assertSlotsFit, DEFAULT_MAX_PAYLOAD, MAX_WORKER_TAGS } from '../pulse-size.js';

/** What a task handler is told besides its input. */
export type { LogStream };

export interface HandlerContext {
  /**
   * Fires when the task must stop: its step's `timeoutMs` passed, it was cancelled, or the
   * worker's drain deadline came. A handler should stop promptly; one that ignores it is
   * abandoned (its slot freed, its report sent) {@link WorkerOptions.killGraceMs} later.
   */
  signal: AbortSignal;
  runId: string;
  stepId: string;
  taskId: string;
  /** Publishes of this task so far, this one included. */
  attempt: number;
  attemptId: string;
  /** The task's own command, when it has one. */
  command?: string[];
  /**
   * Reports how far the task got: any JSON value of at most 1 KiB (a fraction, `{ done,
   * total }`, a short message). `sonar status`, `watch()` and the dashboard show the latest;
   * calls closer together than a couple of seconds are coalesced. Throws a TypeError for a
   * value that is not JSON or too large.
   */
  progress(value: unknown): void;
  /**
   * Adds `text` as it is (add your own newlines) to this attempt's log, which `sonar logs`
   * and the dashboard's task page show: `stderr` unless told. Kept bounded: a task that
   * writes faster than it is sent loses the middle, never the newest output.
   */
  log(text: string, stream?: LogStream): void;
}

/**
 * Runs one task. The resolved value is the output: bytes as they are, a string as UTF-8,
 * `undefined` as empty, anything else as JSON. A thrown `NonRetryableError` fails the task
 * for good; any other error is a retryable failure.
 */
export type TaskHandler<I = unknown, O = unknown> = (
  input: I,
  ctx: HandlerContext,
) => O | Promise<O>;

/**
 * One step's handler in {@link WorkerOptions.handlers}: a function, or one with a schema its
 * input must satisfy first.
 */
export type StepHandler =
  | TaskHandler<never, unknown>
  | { schema?: StandardSchemaV1<unknown, never>; handler: TaskHandler<never, unknown> };

export type Duration = number | string;

/** Options of `createWorker()`. Durations are milliseconds or strings like `'20s'`. */
export interface WorkerOptions<I = unknown, O = unknown> {
  /** Routing tags this worker pulls tasks for (`dispatch_<tag>`): 1 to 64 ids. */
  tags: string[];
  /**
   * Tasks held at once, pulled or running, across all tags. At most 7,878: every pulse lists
   * the tasks held, and must fit in one NATS message (1 MiB by default; a server with a
   * smaller `max_payload` allows fewer, checked once connected).
   * @defaultValue 1
   */
  slots?: number;
  /** Runs every task; or give {@link WorkerOptions.handlers}, one per step. */
  handler?: TaskHandler<I, O>;
  /**
   * Checked before `handler` runs, which gets its output: any Standard Schema (zod 3.24 and
   * later, valibot, arktype...). A refused input fails the attempt for good (not retryable),
   * naming each field, e.g. `input.size: Expected number, received string`.
   */
  schema?: StandardSchemaV1<unknown, I>;
  /**
   * A handler per step id, each with its own schema if given: a task of a step with none
   * fails (retryably: another worker on the tag may have it). Instead of `handler`.
   */
  handlers?: Readonly<Record<string, StepHandler>>;
  /**
   * `SONAR_WORKER_COMMANDS`: which task `command`s this worker accepts. `'any'`: every one;
   * `'none'`: a task that carries a command is refused, only `handler` runs (what a worker
   * whose handler never runs `ctx.command` should say); a list (or a comma-separated string)
   * of absolute paths or names: a task's `command[0]` must be exactly one of them. A refused
   * task fails for good (`retryable: false`, exit code -1) before `handler` is called.
   * `'any'` is the default so that workers upgraded one at a time keep running the commands
   * they ran before; set it on any worker that serves tags untrusted clients may submit to.
   * @defaultValue `'any'`
   */
  commands?: CommandsOption;
  /** An open connection (not closed by the worker); otherwise one is made from `connection`. */
  nc?: NatsConnection;
  /**
   * How to connect when no `nc` is given.
   * @defaultValue `{ natsUrl: 'nats://127.0.0.1:4222' }`
   */
  connection?: ConnectSettings;
  /**
   * The topology prefix (`SONAR_PREFIX`).
   * @defaultValue `sonar`
   */
  prefix?: string;
  /**
   * This process's worker id; used once (a restarted process must take a new one).
   * @defaultValue `<host>-<nuid>`
   */
  workerId?: string;
  /**
   * @defaultValue `os.hostname()`
   */
  host?: string;
  /** The cloud instance id; read from IMDS when spot notices are on and this is unset. */
  instanceId?: string;
  /**
   * `SONAR_DRAIN_GRACE`: how long a drain lets running tasks finish.
   * @defaultValue `'20s'`
   */
  drainGraceMs?: Duration;
  /**
   * Watch for spot interruption notices: `true`, `false`, or `'auto'` (on when IMDS answers).
   * @defaultValue false
   */
  spot?: boolean | 'auto';
  /**
   * `SONAR_IMDS_URL`.
   * @defaultValue `http://169.254.169.254`
   */
  imdsUrl?: string;
  /**
   * `SONAR_SPOT_MARGIN`: a spot drain ends this long before the notice's time.
   * @defaultValue `'10s'`
   */
  spotMarginMs?: Duration;
  /**
   * How often the spot notice is polled.
   * @defaultValue `'5s'`
   */
  spotPollMs?: Duration;
  /**
   * `SONAR_MAX_OUTPUT`: a larger output fails the task for good.
   * @defaultValue 64 MiB
   */
  maxOutputBytes?: number;
  /** `SONAR_S3_*`: upload outputs there instead of the `<prefix>_outputs` object store. */
  s3?: S3Config;
  /** An output store to use as it is (tests); otherwise one is made from `s3`/`prefix`. */
  outputs?: OutputStore;
  /**
   * One API request's timeout.
   * @defaultValue 5000
   */
  requestTimeoutMs?: number;
  /**
   * After an abort, how long a command gets between SIGTERM and SIGKILL, and how long a
   * handler gets before it is abandoned (this plus one second).
   * @defaultValue `'5s'`
   */
  killGraceMs?: Duration;
  /**
   * How long a pull waits for a message before trying the next tag (1 s to 60 s).
   * @defaultValue 1000
   */
  pullExpiresMs?: number;
  /**
   * `SONAR_STOP_GRACE`: after the drain deadline, the most the worker spends releasing what
   * still runs, saying goodbye and closing; a step still going then is left behind (the
   * backend recovers what it held) and the worker stops.
   * @defaultValue `'10s'`
   */
  stopGraceMs?: Duration;
  /**
   * Where the worker says what it does (joined, drained, a report refused...): JSON lines.
   * `silentLogger` says nothing.
   * @defaultValue JSON lines on stderr from `warn` up (`SONAR_LOG_LEVEL` sets the level)
   */
  log?: Logger;
}

/** {@link WorkerOptions} with every default filled in and durations in ms. */
export interface ResolvedWorkerOptions extends Required<
  Omit<
    WorkerOptions,
    | 'nc'
    | 'connection'
    | 's3'
    | 'outputs'
    | 'instanceId'
    | 'workerId'
    | 'host'
    | 'commands'
    | 'handler'
    | 'schema'
    | 'handlers'
  >
> {
  /** The one handler: the schema, the step routing and the command policy applied. */
  handler: TaskHandler;
  /** The task commands accepted; {@link ResolvedWorkerOptions.handler} already enforces it. */
  commands: CommandPolicy;
  nc: NatsConnection | undefined;
  connection: ConnectSettings;
  s3: S3Config | undefined;
  outputs: OutputStore | undefined;
  instanceId: string | undefined;
  drainGraceMs: number;
  spotMarginMs: number;
  spotPollMs: number;
  killGraceMs: number;
  stopGraceMs: number;
}

const ms = (value: Duration | undefined, fallback: string): number =>
  parseDuration(value ?? fallback);

/**
 * Merges defaults, validates and converts durations (STYLE.md C3).
 *
 * @throws ValidationError naming the field: no tags, more than 64, a tag that is not an id,
 *   slots not a whole number of at least 1, or more than a pulse can list in 1 MiB, or a
 *   `commands` that is not `any`, `none` or a list of absolute paths or names.
 */
export function resolveWorkerOptions<I, O>(opts: WorkerOptions<I, O>): ResolvedWorkerOptions {
  checkTagsAndSlots(opts.tags, opts.slots ?? 1);
  const commands = resolveCommandPolicy(opts.commands);
  return {
    tags: opts.tags,
    slots: opts.slots ?? 1,
    // The policy wraps the handler: a refused task fails before any code of the user's runs.
    handler: guardCommands(routeHandler(opts), commands, opts.log?.child({ component: 'worker' })),
    commands,
    nc: opts.nc,
    connection: opts.connection ?? { natsUrl: 'nats://127.0.0.1:4222' },
    prefix: opts.prefix ?? 'sonar',
    instanceId: opts.instanceId,
    drainGraceMs: ms(opts.drainGraceMs, '20s'),
    spot: opts.spot ?? false,
    imdsUrl: opts.imdsUrl ?? 'http://169.254.169.254',
    spotMarginMs: ms(opts.spotMarginMs, '10s'),
    spotPollMs: ms(opts.spotPollMs, '5s'),
    maxOutputBytes: opts.maxOutputBytes ?? 64 * 1024 * 1024,
    s3: opts.s3,
    outputs: opts.outputs,
    requestTimeoutMs: opts.requestTimeoutMs ?? 5_000,
    killGraceMs: ms(opts.killGraceMs, '5s'),
    pullExpiresMs: Math.min(
      PULL_MAX_EXPIRES_MS,
      Math.max(PULL_MIN_EXPIRES_MS, opts.pullExpiresMs ?? 1_000),
    ),
    stopGraceMs: ms(opts.stopGraceMs, '10s'),
    log: opts.log ?? createLogger({ level: loadProcessSetting('SONAR_LOG_LEVEL') ?? 'warn' }),
  };
}

function checkTagsAndSlots(tags: string[], slots: number): void {
  const refuse = (path: string, message: string): never => {
    throw new ValidationError(`'${path}' ${message}`, [{ path, message }]);
  };
  if (tags.length === 0) refuse('tags', 'needs at least one tag');
  if (tags.length > MAX_WORKER_TAGS) {
    refuse('tags', `has ${tags.length} tags, over ${MAX_WORKER_TAGS}`);
  }
  tags.forEach((t, i) => assertId(`tags.${i}`, t));
  if (!Number.isInteger(slots) || slots < 1) {
    refuse('slots', `must be a whole number of at least 1, got ${JSON.stringify(slots)}`);
  }
  assertSlotsFit(slots, DEFAULT_MAX_PAYLOAD);
}
