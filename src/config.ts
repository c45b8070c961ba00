/**
 * Sonar's configuration (DESIGN.md §9): one zod schema over the `SONAR_*` environment
 * variables, with CLI flags on top. Durations and sizes resolve to milliseconds and bytes.
 *
 * A bad value is refused with the variable's name and the value:
 * `SONAR_PULSE_INTERVAL: "5x" is not a duration (e.g. 5s)`.
 *
 * @module
 */
import { delimiter } from 'node:path';
import { z } from 'zod';
import { ErrorCode, SonarError } from '../actors/errors.js';
import { SETTINGS } from './config-table.js';
import type { ConfigVariable, DefaultedRow, ParsedSetting, SettingRow } from './config-table.js';
import type { Parser, Raw } from './config-parsers.js';
import { formatDuration } from './duration.js';
import type { CommandPolicy } from './worker/command-policy.js';

/** Where outputs go when `SONAR_S3_*` is set (otherwise the `sonar_outputs` object store). */
export interface S3Config {
  /** `SONAR_S3_ENDPOINT`: an http(s) URL, e.g. `https://s3.eu-west-1.amazonaws.com`. */
  endpoint: string;
  /** `SONAR_S3_BUCKET`. */
  bucket: string;
  /** `SONAR_S3_ACCESS_KEY`. */
  accessKey: string;
  /** `SONAR_S3_SECRET_KEY`. */
  secretKey: string;
}

/** The resolved configuration: durations in ms, sizes in bytes. */
export interface SonarConfig {
  /**
   * `SONAR_NATS_URL`: the NATS server(s), comma-separated.
   * @defaultValue `nats://127.0.0.1:4222` (where `sonar dev` listens by default)
   */
  natsUrl: string;
  /**
   * `SONAR_NATS_CREDS`: path of a NATS creds file.
   * @defaultValue unset
   */
  natsCreds?: string;
  /**
   * `SONAR_NATS_USER`: user name, with {@link SonarConfig.natsPassword}.
   * @defaultValue unset
   */
  natsUser?: string;
  /**
   * `SONAR_NATS_PASSWORD`.
   * @defaultValue unset
   */
  natsPassword?: string;
  /**
   * `SONAR_NATS_TLS_CA`: path of a CA bundle to verify the server with. Set, or a `tls://`
   * URL, the connection requires TLS.
   * @defaultValue unset
   */
  natsTlsCa?: string;
  /**
   * `SONAR_NATS_TLS_CERT`: path of a client certificate, for a server that requires mutual
   * TLS; with {@link SonarConfig.natsTlsKey} (both or neither).
   * @defaultValue unset
   */
  natsTlsCert?: string;
  /**
   * `SONAR_NATS_TLS_KEY`: path of the client certificate's private key.
   * @defaultValue unset
   */
  natsTlsKey?: string;
  /**
   * `SONAR_NATS_INBOX_PREFIX`: where this process's NATS replies arrive. A credential made
   * by `sonar creds init` may subscribe only under its role's prefix (`_INBOX_R.<role>`), so
   * another holder of a shared credential of another role cannot read its replies.
   * @defaultValue `_INBOX` (nats.js's own)
   */
  natsInboxPrefix?: string;
  /**
   * `SONAR_WORKER_SIGNING_KEY` (backend): path of the seed of the account's scoped signing
   * key for workers. Set, the backend runs in secure mode: `enroll` mints each worker a
   * credential of its own, and worker verbs are served on each worker's own subject only.
   * @defaultValue unset (open mode)
   */
  workerSigningKey?: string;
  /**
   * `SONAR_WORKER_ACCOUNT_JWT` (backend, secure mode): path of the workers' account JWT
   * (`workers-account.jwt` of `sonar creds init`), the account whose scoped signing key
   * {@link SonarConfig.workerSigningKey} is and in which workers' credentials are minted and
   * revoked. Unset, workers are minted into the backend's own account, as credentials made
   * before the workers' account existed expect (weaker: docs/threat-model.md).
   * @defaultValue unset
   */
  workerAccountJwt?: string;
  /**
   * `SONAR_WORKER_CREDENTIAL_TTL` (backend): how long a worker's credential lives; workers
   * renew it at half its life.
   * @defaultValue 1h
   */
  workerCredentialTtlMs: number;
  /**
   * `SONAR_NATS_OPERATOR_SIGNING_KEY` (backend): path of an operator signing key's seed.
   * With {@link SonarConfig.natsSysCreds}, `revoke` disconnects the worker at once by
   * pushing the account with the revocation; without, its credential lapses at expiry.
   * @defaultValue unset
   */
  natsOperatorSigningKey?: string;
  /**
   * `SONAR_NATS_SYS_CREDS` (backend): creds of a system account user, to push revocations.
   * @defaultValue unset
   */
  natsSysCreds?: string;
  /**
   * `SONAR_PREFIX`: renames every subject, stream and bucket (DESIGN.md §2). Lowercase
   * letters, digits, `_` and `-`, starting with a letter, at most 31 characters.
   * @defaultValue `sonar`
   */
  prefix: string;
  /**
   * `SONAR_TICK`: how often the reconciler leader reconciles.
   * @defaultValue 2s
   */
  tickMs: number;
  /**
   * `SONAR_PUBLISH_TIMEOUT`: a Published task no worker started within this is requeued.
   * @defaultValue 10m
   */
  publishTimeoutMs: number;
  /**
   * `SONAR_ORPHAN_AGE`: a Running task on a worker that is no longer live is requeued once
   * it has run this long.
   * @defaultValue 10m
   */
  orphanAgeMs: number;
  /**
   * `SONAR_PULSE_INTERVAL`: how often a worker puts its registry entry.
   * @defaultValue 5s
   */
  pulseIntervalMs: number;
  /**
   * `SONAR_PULSE_TTL`: the registry bucket's TTL; must be more than the pulse interval.
   * @defaultValue 15s (3 pulses)
   */
  pulseTtlMs: number;
  /**
   * `SONAR_RECOVERY_LIMIT`: recoveries within the window after which a task goes Dead.
   * @defaultValue 3
   */
  recoveryLimit: number;
  /**
   * `SONAR_RECOVERY_WINDOW`: the window recoveries are counted in.
   * @defaultValue 72h
   */
  recoveryWindowMs: number;
  /**
   * `SONAR_CAPACITY_MULTIPLIER`: capacity = floor(multiplier × slots); may be fractional.
   * @defaultValue 1
   */
  capacityMultiplier: number;
  /**
   * `SONAR_DISPATCH_BATCH`: tasks a step places per turn of the water-fill.
   * @defaultValue 8
   */
  dispatchBatch: number;
  /**
   * `SONAR_FINALIZERS`: concurrent finalization jobs per backend.
   * @defaultValue 4
   */
  finalizers: number;
  /**
   * `SONAR_FINALIZE_LEASE`: a finalization job's lease (the consumer's ack_wait).
   * @defaultValue 30s
   */
  finalizeLeaseMs: number;
  /**
   * `SONAR_FINALIZE_MAX_DELIVER`: deliveries of a finalization job before it is poisoned.
   * @defaultValue 6
   */
  finalizeMaxDeliver: number;
  /**
   * `SONAR_DRAIN_GRACE`: how long a draining worker lets running tasks finish.
   * @defaultValue 20s (under Kubernetes' default 30 s termination grace)
   */
  drainGraceMs: number;
  /**
   * `SONAR_SPOT_MARGIN`: a worker under a spot notice stops this long before the notice's time.
   * @defaultValue 10s
   */
  spotMarginMs: number;
  /**
   * `SONAR_WORKER_COMMANDS`: which task commands a worker runs: `any`, `none` (only its own
   * handler or `-- CMD`), or a comma-separated allow-list of absolute paths or names that a
   * task's `command[0]` must equal exactly. A refused task fails for good.
   * @defaultValue any (what workers did before the setting; see docs/operations.md, Configuration)
   */
  workerCommands: CommandPolicy;
  /**
   * `SONAR_MAX_OUTPUT`: larger task outputs are refused.
   * @defaultValue 64MiB
   */
  maxOutputBytes: number;
  /**
   * `SONAR_MAX_INPUT`: larger task inputs are refused.
   * @defaultValue 256KiB
   */
  maxInputBytes: number;
  /**
   * `SONAR_MAX_OPEN_TASKS`: a submit that would take the open tasks (not yet settled: Pending,
   * Published, Running, Finalizing) over this many is refused with `overloaded`. Every
   * backend holds every task in memory (about 700 B each, plus its input): the default
   * suits a backend with 1 GiB of memory and inputs of a few KiB (docs/operations.md, Configuration).
   * @defaultValue 100000
   */
  maxOpenTasks: number;
  /**
   * `SONAR_LOCK_TTL`: TTL of the leader lock; must be more than the tick.
   * @defaultValue 10s
   */
  lockTtlMs: number;
  /**
   * `SONAR_REPLICAS`: replicas of every stream and bucket (1 to 5; 3 on a cluster).
   * @defaultValue 1
   */
  replicas: number;
  /**
   * `SONAR_EVENTS_MAX_BYTES`: the events stream's own byte bound; new work is refused before
   * it is reached (error `store_full`), so the registry, the leader lock and the tasks already
   * running keep room. `auto`: half the account's JetStream storage limit when it has one,
   * else no bound.
   * @defaultValue auto
   */
  eventsMaxBytes: number | 'auto';
  /**
   * `SONAR_STAGING_MAX_BYTES`: the byte bound of the stream where workers in secure mode stage
   * outputs over the inline limit until their `result` moves them into the object store. A
   * full staging stream refuses new uploads (the task fails and is retried), never evicts.
   * Counted in chunks of 128 KiB, so nothing is reserved from the server's `max_file_store`.
   * @defaultValue 1GiB
   */
  stagingMaxBytes: number;
  /**
   * `SONAR_HTTP_PORT`: one port for `/metrics`, `/healthz`, `/readyz`, the dashboard and its
   * API; `0` picks a free port.
   * @defaultValue unset (off)
   */
  httpPort?: number;
  /**
   * `SONAR_HTTP_HOST`: the address the HTTP server binds; `0.0.0.0` opens it to the network
   * (a Kubernetes probe, a remote Prometheus).
   * @defaultValue unset (`127.0.0.1`)
   */
  httpHost?: string;
  /**
   * `SONAR_HTTP_TOKEN`: when set, every request to the HTTP port (dashboard, its API and SSE)
   * needs it, as `Authorization: Bearer <token>` or the dashboard's login cookie.
   * @defaultValue unset (no token; the port binds to 127.0.0.1 only)
   */
  httpToken?: string;
  /**
   * `SONAR_DASHBOARD`: `off` serves only `/metrics`, `/healthz` and `/readyz` on the HTTP port
   * (probes-only mode, safe on any address without a token); every other path is 404.
   * @defaultValue on
   */
  dashboard: boolean;
  /**
   * `SONAR_SESSION_TTL`: how long a dashboard login lasts; sessions live in the
   * `sonar_sessions` bucket, whose TTL this is, so every backend honours it and a logout.
   * @defaultValue 12h
   */
  sessionTtlMs: number;
  /**
   * `SONAR_HTTP_SECURE_COOKIE`: whether the session cookie is `Secure`. `auto`: when the
   * login arrived over TLS or with `X-Forwarded-Proto: https` (a TLS-terminating proxy).
   * @defaultValue auto
   */
  httpSecureCookie: 'auto' | boolean;
  /**
   * `SONAR_HTTP_TRUSTED_PROXIES`: how many proxies in front of the HTTP port append to
   * `X-Forwarded-For`; the client address (failed-login limits) is that many entries from
   * its right. 0: the socket's peer address, and the header is ignored.
   * @defaultValue 0
   */
  httpTrustedProxies: number;
  /**
   * `SONAR_RETENTION`: events, results and outputs of runs finished longer ago are purged.
   * @defaultValue 30d
   */
  retentionMs: number;
  /**
   * `SONAR_FULL_SWEEP`: how often one backend runs the full sweep.
   * @defaultValue 1h
   */
  fullSweepMs: number;
  /**
   * `SONAR_STOP_GRACE`: how long a stopping process waits for each long-running part (the
   * reconciler, finalizers, the sweeper, the API, a worker's tasks after release) before it
   * leaves that part behind and exits; a finalization job in hand comes back after its lease.
   * @defaultValue 10s
   */
  stopGraceMs: number;
  /**
   * `SONAR_IMDS_URL`: base URL of the instance metadata service (spot notices).
   * @defaultValue `http://169.254.169.254`
   */
  imdsUrl: string;
  /**
   * `SONAR_S3_ENDPOINT`, `SONAR_S3_BUCKET`, `SONAR_S3_ACCESS_KEY`, `SONAR_S3_SECRET_KEY`:
   * all four or none.
   * @defaultValue unset (outputs go to the `sonar_outputs` object store)
   */
  s3?: S3Config;
  /**
   * `SONAR_ALLOW_SNAPSHOT_LOSS`: start a backend even though the projection snapshot is
   * unusable while retention has purged events. Runs whose events were purged lived only in
   * that snapshot and are then lost; what is left of the stream is replayed.
   * @defaultValue unset (false: such a backend refuses to start)
   */
  allowSnapshotLoss?: boolean;
}

/** A configuration value was refused. The message names the variable and the value. */
export class ConfigError extends SonarError {
  override readonly name = 'ConfigError';
  /** Every problem found; {@link ConfigError.variable} and `value` are the first one's. */
  readonly problems: readonly ConfigProblem[];
  /** The environment variable, e.g. `SONAR_PULSE_INTERVAL`. */
  readonly variable: string;
  /** The value refused (`undefined` when a required companion variable is missing). */
  readonly value: string | number | undefined;

  constructor(problems: readonly [ConfigProblem, ...ConfigProblem[]], options?: ErrorOptions) {
    super(
      ErrorCode.Validation,
      problems.map((p) => `${p.variable}: ${p.message}`).join('; '),
      { variable: problems[0].variable, problems: problems.map((p) => p.message) },
      options,
    );
    this.problems = problems;
    this.variable = problems[0].variable;
    this.value = problems[0].value;
  }
}

/** One refused value. */
export interface ConfigProblem {
  variable: string;
  value: string | number | undefined;
  /** Without the variable's name, e.g. `"5x" is not a duration (e.g. 5s)`. */
  message: string;
}

export const isConfigError = (err: unknown): err is ConfigError => err instanceof ConfigError;

/** Defaults as an operator would write them. */
/** Every setting's default, by variable (only those that have one). */
export const configDefaults = Object.fromEntries(
  Object.entries(SETTINGS).flatMap(([v, row]) =>
    row.default === undefined ? [] : [[v, row.default]],
  ),
) as {
  readonly [
    V in ConfigVariable as (typeof SETTINGS)[V] extends DefaultedRow<unknown> ? V : never
  ]: string;
};

/** Empty strings count as unset, so `SONAR_HTTP_PORT=` turns the port off. */
function given(value: Raw | undefined): Raw | undefined {
  return typeof value === 'string' && value.trim() === '' ? undefined : value;
}

function run<T>(ctx: z.RefinementCtx, parse: Parser<T>, raw: Raw): T {
  try {
    return parse(raw);
  } catch (err: unknown) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return z.NEVER;
  }
}

const rawValue = z.union([z.string(), z.number()]).optional();

function setting<T>(fallback: string, parse: Parser<T>) {
  return rawValue.transform((value, ctx): T => run(ctx, parse, given(value) ?? fallback));
}

function optionalSetting<T>(parse: Parser<T>) {
  return rawValue.transform((value, ctx): T | undefined => {
    const raw = given(value);
    return raw === undefined ? undefined : run(ctx, parse, raw);
  });
}

const S3_VARIABLES = [
  'SONAR_S3_ENDPOINT',
  'SONAR_S3_BUCKET',
  'SONAR_S3_ACCESS_KEY',
  'SONAR_S3_SECRET_KEY',
] as const;

/**
 * The schema over the environment. Input: an env-like record (unknown keys are ignored; values
 * may be numbers, as CLI flags are); output: {@link SonarConfig}. Prefer {@link loadConfig},
 * which turns failures into a {@link ConfigError}.
 */
/** The zod field of each setting: its default applied, then its parser. */
const settingShape = Object.fromEntries(
  Object.entries(SETTINGS).map(([v, row]: [string, SettingRow<unknown>]) => [
    v,
    row.default === undefined ? optionalSetting(row.parse) : setting(row.default, row.parse),
  ]),
) as unknown as {
  [V in ConfigVariable]: z.ZodType<ParsedSetting<(typeof SETTINGS)[V]>, Raw | undefined>;
};

export const sonarEnvSchema = z.object(settingShape).transform((env, ctx): SonarConfig => {
  const problem = (variable: string, message: string): void => {
    ctx.addIssue({ code: 'custom', message, path: [variable] });
  };
  // Workers would look dead between two pulses.
  if (env.SONAR_PULSE_TTL <= env.SONAR_PULSE_INTERVAL) {
    problem(
      'SONAR_PULSE_TTL',
      `"${formatDuration(env.SONAR_PULSE_TTL)}" must be more than SONAR_PULSE_INTERVAL (${formatDuration(env.SONAR_PULSE_INTERVAL)})`,
    );
  }
  // The leader renews its lock every tick; a shorter TTL would lose it between renewals.
  if (env.SONAR_LOCK_TTL <= env.SONAR_TICK) {
    problem(
      'SONAR_LOCK_TTL',
      `"${formatDuration(env.SONAR_LOCK_TTL)}" must be more than SONAR_TICK (${formatDuration(env.SONAR_TICK)})`,
    );
  }
  // A certificate is useless without its key, and the reverse: refuse half a pair.
  if ((env.SONAR_NATS_TLS_CERT === undefined) !== (env.SONAR_NATS_TLS_KEY === undefined)) {
    const [missing, given] =
      env.SONAR_NATS_TLS_CERT === undefined
        ? ['SONAR_NATS_TLS_CERT', 'SONAR_NATS_TLS_KEY']
        : ['SONAR_NATS_TLS_KEY', 'SONAR_NATS_TLS_CERT'];
    problem(missing, `unset, but ${given} is set (set both for mutual TLS, or neither)`);
  }
  const s3Set = S3_VARIABLES.filter((v) => env[v] !== undefined);
  const s3Missing = S3_VARIABLES.filter((v) => env[v] === undefined);
  if (s3Set.length > 0 && s3Missing[0] !== undefined) {
    problem(
      s3Missing[0],
      `unset, but ${s3Set.join(', ')} ${s3Set.length > 1 ? 'are' : 'is'} set (set all four SONAR_S3_* or none)`,
    );
  }
  const {
    SONAR_S3_ENDPOINT: endpoint,
    SONAR_S3_BUCKET: bucket,
    SONAR_S3_ACCESS_KEY: accessKey,
    SONAR_S3_SECRET_KEY: secretKey,
  } = env;
  const s3 =
    endpoint !== undefined &&
    bucket !== undefined &&
    accessKey !== undefined &&
    secretKey !== undefined
      ? { endpoint, bucket, accessKey, secretKey }
      : undefined;
  // Every field but those of `s3`, which is whole or absent (checked above).
  const fields = Object.fromEntries(
    configVariables
      .filter((v) => !SETTINGS[v].field.includes('.'))
      .map((v) => [SETTINGS[v].field, env[v]]),
  );
  return dropUndefined({ ...fields, s3 } as SonarConfig);
});

/** Optional fields are absent rather than `undefined`, so `'httpPort' in config` means set. */
function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

export type { ConfigVariable } from './config-table.js';

/** Every `SONAR_*` variable, in DESIGN.md §9 order. */
export const configVariables = Object.keys(SETTINGS) as ConfigVariable[];

/**
 * The CLI flag of a variable: `SONAR_PULSE_INTERVAL` → `pulse-interval` (so
 * `--pulse-interval 5s`; commander hands it back as `pulseInterval`).
 */
export function configFlag(variable: ConfigVariable): string {
  return variable.slice('SONAR_'.length).toLowerCase().replaceAll('_', '-');
}

const camel = (flag: string): string =>
  flag.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/** Override keys: the variable, its field (`pulseIntervalMs`, `s3.bucket`) or its flag in camelCase (`pulseInterval`). */
const OVERRIDE_KEYS = new Map<string, ConfigVariable>(
  configVariables.flatMap((v) => [
    [v, v],
    [SETTINGS[v].field, v],
    [camel(configFlag(v)), v],
  ]),
);

/**
 * Reads the configuration from `env`, then applies `overrides` (CLI flags) on top.
 *
 * Override keys may be the variable (`SONAR_PULSE_INTERVAL`), the config field
 * (`pulseIntervalMs`) or the flag in camelCase (`pulseInterval`, as commander returns it);
 * other keys and `undefined` values are ignored, so commander's whole `opts()` can be passed.
 * Numbers mean milliseconds or bytes.
 *
 * @throws ConfigError naming the first bad variable and its value, e.g.
 * `SONAR_PULSE_INTERVAL: "5x" is not a duration (e.g. 5s)`.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
  overrides: Readonly<Partial<Record<string, string | number>>> = {},
): SonarConfig {
  const input: Partial<Record<ConfigVariable, Raw>> = {};
  for (const v of configVariables) {
    const value = env[v];
    if (value !== undefined) input[v] = value;
  }
  for (const [key, value] of Object.entries(overrides)) {
    const v = OVERRIDE_KEYS.get(key);
    if (v !== undefined && value !== undefined) input[v] = value;
  }
  const parsed = sonarEnvSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue): ConfigProblem => {
    const variable = String(issue.path[0] ?? 'SONAR');
    const value =
      input[variable as ConfigVariable] ??
      (configDefaults as Partial<Record<string, string>>)[variable];
    return { variable, value, message: issue.message };
  });
  const [first, ...rest] = problems;
  if (first === undefined)
    throw new ConfigError([{ variable: 'SONAR', value: undefined, message: parsed.error.message }]);
  throw new ConfigError([first, ...rest]);
}

/** A copy safe to log: passwords, secret keys and the HTTP token replaced by `***`. */
export function redactConfig(config: SonarConfig): SonarConfig {
  return {
    ...config,
    ...(config.natsPassword !== undefined && { natsPassword: '***' }),
    ...(config.httpToken !== undefined && { httpToken: '***' }),
    ...(config.s3 !== undefined && { s3: { ...config.s3, secretKey: '***' } }),
  };
}

/**
 * The process's own settings: its environment, with `overrides` (CLI flags) on top. The
 * configuration module is the only one in `src/` that reads `process.env` (lint), so what a
 * process reads of its environment is all listed here.
 */
export function loadProcessConfig(
  overrides: Readonly<Partial<Record<string, string | number>>> = {},
): SonarConfig {
  return loadConfig(process.env, overrides);
}

/** The raw environment variables read outside the `SONAR_*` table, each for one reason. */
export const processEnvironment = {
  /** `SONAR_LOG_LEVEL`: read by the logger before any configuration is loaded. */
  logLevel: (): string | undefined => process.env['SONAR_LOG_LEVEL'],
  /** `SONAR_STRICT_DURABILITY`: the backend's `--strict-durability` flag as a variable. */
  strictDurability: (): string | undefined => process.env['SONAR_STRICT_DURABILITY'],
  /** `SONAR_DEBUG`: any non-empty value prints a failed verb's stack trace. */
  debug: (): boolean => Boolean(process.env['SONAR_DEBUG']),
  /** `NO_COLOR` (no-color.org): any non-empty value turns the terminal's colours off. */
  noColor: (): boolean => Boolean(process.env['NO_COLOR']),
  /** `NATS_SERVER_BIN`: the nats-server binary `sonar dev` starts. */
  natsServerBin: (): string | undefined => process.env['NATS_SERVER_BIN'],
  /** `PATH`, as the directories it lists. */
  searchPath: (): string[] => (process.env['PATH'] ?? '').split(delimiter),
  /** What a child process inherits: this environment with `extra` on top. */
  forChild: (extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv => ({
    ...process.env,
    ...extra,
  }),
};
