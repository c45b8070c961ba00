/**
 * Every `SONAR_*` setting, one row each (DESIGN.md section 9, in its order): its variable, its
 * field in {@link SonarConfig}, its default, its parser, what it does and which processes
 * read it. The {@link SonarConfig} type, environment parsing, CLI flags, `--help` text and
 * docs/configuration.md are all derived from this table.
 */
import {
  duration,
  flag,
  flagOrAuto,
  httpUrl,
  integer,
  logLevel,
  natsUrl,
  port,
  positiveNumber,
  prefix,
  size,
  sizeOrAuto,
  tagRates,
  text,
} from './config-parsers.js';
import type { Parser } from './config-parsers.js';
import { maskResultsUrl, parseResultsUrl } from './storage/postgres/pg-url.js';
import { parseCommandPolicy } from './worker/command-policy.js';
import { FINALIZE_BATCH_MAX } from '../streams/queues.js';

/** The processes a setting matters to. `cli`: the one-shot verbs and the client SDK. */
export type SettingUser = 'backend' | 'worker' | 'cli';

/**
 * `F` is the field's name as a literal type, so that {@link SonarConfig} can be derived from
 * the table: each row names its field and, through its parser, the field's type.
 */
interface RowBase<T, F extends string> {
  /** The {@link SonarConfig} field (`s3.bucket`: a field of `s3`). */
  field: F;
  parse: Parser<T>;
  /** What it does, in a few words: the `--help` text and the reference's description. */
  doc: string;
  /**
   * What the few words leave out: units, the default's reason, interactions with other
   * settings. docs/configuration.md gives it below the table; `--help` stays one line.
   */
  detail?: string;
  usedBy: readonly SettingUser[];
  /**
   * A switch: `sonar backend --<flag>` takes no value and turns the setting on (a boolean
   * setting whose flag was always a bare switch).
   */
  switch?: true;
  /**
   * How a value is shown in an error: a setting holding a secret inside a larger value (a
   * password in a URL) masks it, so a refused value never prints the secret.
   */
  mask?: (raw: string) => string;
}

/** A setting with a default: its parsed value is always there. */
export interface DefaultedRow<T, F extends string = string> extends RowBase<T, F> {
  default: string;
}

/** A setting without a default: unset means off, or nothing given. */
export interface OptionalRow<T, F extends string = string> extends RowBase<T, F> {
  default?: undefined;
}

export type SettingRow<T, F extends string = string> = DefaultedRow<T, F> | OptionalRow<T, F>;

const ALL: readonly SettingUser[] = ['backend', 'worker', 'cli'];
const BACKEND: readonly SettingUser[] = ['backend'];
const WORKER: readonly SettingUser[] = ['worker'];

const defaulted = <F extends string, T>(
  field: F,
  value: string,
  parse: Parser<T>,
  doc: string,
  usedBy: readonly SettingUser[],
  detail?: string,
): DefaultedRow<T, F> => ({ field, default: value, parse, doc, usedBy, detail });

const optional = <F extends string, T>(
  field: F,
  parse: Parser<T>,
  doc: string,
  usedBy: readonly SettingUser[],
  detail?: string,
): OptionalRow<T, F> => ({ field, parse, doc, usedBy, detail });

export const SETTINGS = {
  SONAR_NATS_URL: defaulted(
    'natsUrl',
    'nats://127.0.0.1:4222',
    natsUrl,
    'NATS server(s), comma-separated',
    ALL,
    'The default is where `sonar dev` listens.',
  ),
  SONAR_NATS_CREDS: optional('natsCreds', text, 'NATS creds file', ALL),
  SONAR_NATS_USER: optional('natsUser', text, 'NATS user (with --nats-password)', ALL),
  SONAR_NATS_PASSWORD: optional('natsPassword', text, 'NATS password', ALL),
  SONAR_NATS_TLS_CA: optional(
    'natsTlsCa',
    text,
    'CA bundle to verify the NATS server (requires TLS)',
    ALL,
    'A path. Set, or with a `tls://` URL in `SONAR_NATS_URL`, the connection requires TLS.',
  ),
  SONAR_NATS_TLS_CERT: optional(
    'natsTlsCert',
    text,
    'client certificate for mutual TLS (with --nats-tls-key)',
    ALL,
    'A path, for a server that requires mutual TLS. Set both it and `SONAR_NATS_TLS_KEY`, or neither.',
  ),
  SONAR_NATS_TLS_KEY: optional(
    'natsTlsKey',
    text,
    'private key of the client certificate',
    ALL,
    'A path; set with `SONAR_NATS_TLS_CERT` (both or neither).',
  ),
  SONAR_NATS_INBOX_PREFIX: optional(
    'natsInboxPrefix',
    text,
    "where this process's NATS replies arrive (a role's creds file sets _INBOX_R.<role>)",
    ALL,
    "A credential made by `sonar creds init` may subscribe only under its role's prefix (`_INBOX_R.<role>`), so a holder of a shared credential of another role cannot read this process's replies. Unset: `_INBOX`, nats.js's own.",
  ),
  SONAR_WORKER_SIGNING_KEY: optional(
    'workerSigningKey',
    text,
    "seed of the workers' scoped signing key: set, the backend runs in secure mode",
    BACKEND,
    "A path. Set, `enroll` mints each worker a credential of its own, and worker verbs are served on each worker's own subject only. Unset: open mode.",
  ),
  SONAR_WORKER_ACCOUNT_JWT: optional(
    'workerAccountJwt',
    text,
    "JWT of the workers' account that worker credentials are minted into",
    BACKEND,
    "Secure mode: a path, `workers-account.jwt` of `sonar creds init`. It is the account whose scoped signing key `SONAR_WORKER_SIGNING_KEY` is, in which worker credentials are minted and revoked. Unset, workers are minted into the backend's own account, as credentials made before the workers' account existed expect; that is weaker (docs/threat-model.md).",
  ),
  SONAR_WORKER_CREDENTIAL_TTL: defaulted(
    'workerCredentialTtlMs',
    '1h',
    duration(1),
    "lifetime of a worker's minted credential (renewed at half)",
    BACKEND,
  ),
  SONAR_NATS_OPERATOR_SIGNING_KEY: optional(
    'natsOperatorSigningKey',
    text,
    'operator signing key seed, to push revocations into the account JWT',
    BACKEND,
    "A path. With `SONAR_NATS_SYS_CREDS`, `revoke` disconnects the worker at once by pushing the account with the revocation; without, the worker's credential lapses at its expiry.",
  ),
  SONAR_NATS_SYS_CREDS: optional(
    'natsSysCreds',
    text,
    'system account creds, to push account JWT updates to the server',
    BACKEND,
  ),
  SONAR_PREFIX: defaulted(
    'prefix',
    'sonar',
    prefix,
    'renames every subject, stream and bucket',
    ALL,
    'Lowercase letters, digits, `_` and `-`, starting with a letter, at most 31 characters (DESIGN.md section 2).',
  ),
  SONAR_TICK: defaulted(
    'tickMs',
    '2s',
    duration(1),
    'reconcile tick',
    BACKEND,
    "How often the reconciler's leader reconciles; `SONAR_LOCK_TTL` must be more.",
  ),
  SONAR_PUBLISH_TIMEOUT: defaulted(
    'publishTimeoutMs',
    '10m',
    duration(1),
    'a published task nobody started is requeued after this',
    BACKEND,
  ),
  SONAR_ORPHAN_AGE: defaulted(
    'orphanAgeMs',
    '10m',
    duration(1),
    'a running task whose worker is gone is requeued after this',
    BACKEND,
    'The task is requeued once it has run this long on a worker that is no longer live.',
  ),
  SONAR_PULSE_INTERVAL: defaulted(
    'pulseIntervalMs',
    '5s',
    duration(1),
    'worker pulse interval (workers learn it from join)',
    BACKEND,
    'How often a worker puts its registry entry; `SONAR_PULSE_TTL` must be more.',
  ),
  SONAR_PULSE_TTL: defaulted(
    'pulseTtlMs',
    '15s',
    duration(1),
    'registry TTL: a worker silent this long is gone',
    BACKEND,
    "The registry bucket's TTL. It must be more than `SONAR_PULSE_INTERVAL`, or workers would look gone between two pulses; the default is 3 pulses.",
  ),
  SONAR_RECOVERY_LIMIT: defaulted(
    'recoveryLimit',
    '3',
    integer(1),
    'worker-lost recoveries within the window before a task goes Dead',
    BACKEND,
  ),
  SONAR_RECOVERY_WINDOW: defaulted(
    'recoveryWindowMs',
    '72h',
    duration(1),
    'window the recoveries are counted in',
    BACKEND,
  ),
  SONAR_CAPACITY_MULTIPLIER: defaulted(
    'capacityMultiplier',
    '1',
    positiveNumber,
    'capacity = floor(multiplier x slots)',
    BACKEND,
    'May be fractional.',
  ),
  SONAR_DISPATCH_BATCH: defaulted(
    'dispatchBatch',
    '8',
    integer(1),
    'tasks a step places per turn of the water-fill',
    BACKEND,
  ),
  SONAR_PRIORITY_AGING: defaulted(
    'priorityAgingMs',
    '1m',
    duration(0),
    'priority aging: a waiting level ranks one higher per this long (0: off)',
    BACKEND,
    'The starvation guard of priorities: a level ranks as its priority plus one for every this long its longest-waiting due task has waited, so lower priorities still progress under sustained higher-priority load (see [Concepts](concepts.md#placement)). `0` turns aging off. Unused while every task has the same priority.',
  ),
  SONAR_TAG_RATES: optional(
    'tagRates',
    tagRates,
    'per-tag publish rate limits, e.g. api=20/s,gpu=1/m (unset: none)',
    BACKEND,
    'Comma-separated `tag=count/period`: at most that many publishes to the tag in any such period, a token bucket the reconciler computes from the `TaskPublished` times in the log, so `sonar plan` (`--tag-rates`) and replay give the same decisions. The period is `s`, `m`, `h` or a duration (`40/2s`, `5/500ms`); the count may be fractional (`0.5/s` is 1 per 2 s) and its whole part is the burst. `0/s` stops publishing to the tag; a burst above 10000 or a window above 1h is refused. The leader runs a pass when an emptied bucket gets a token back, so a rate is reached whatever `SONAR_TICK` is. Republishes of requeued tasks count. See [Concepts](concepts.md#rate-limits).',
  ),
  SONAR_FINALIZERS: defaulted(
    'finalizers',
    '4',
    integer(1),
    'finalization jobs at once per backend',
    BACKEND,
  ),
  SONAR_FINALIZE_BATCH: defaulted(
    'finalizeBatch',
    '64',
    integer(1, FINALIZE_BATCH_MAX),
    'most inline-output finalization jobs in one message (1: single jobs only)',
    BACKEND,
    "The results a backend accepts in the same moment (a worker's `batch` request, and the requests beside it) with inline outputs go to the finalization queue as one message of up to this many jobs, which the finalizer runs one by one, each with its own fencing; what a batch's first delivery leaves unfinished goes on as single jobs, with their own retries and poison ([Contract](contract.md)). `1` enqueues every job alone, the form every backend reads: set it while backends that predate batches still run beside this one, since such a backend cannot read a batch (it moves it to `SONAR_POISON` as unreadable, and its tasks are finalized one lease later, when the reconciler enqueues their jobs again).",
  ),
  SONAR_FINALIZE_LEASE: defaulted(
    'finalizeLeaseMs',
    '30s',
    duration(1),
    'finalization job lease (ack_wait)',
    BACKEND,
  ),
  SONAR_FINALIZE_MAX_DELIVER: defaulted(
    'finalizeMaxDeliver',
    '6',
    integer(1),
    'deliveries of a finalization job before it is poisoned',
    BACKEND,
  ),
  SONAR_DRAIN_GRACE: defaulted(
    'drainGraceMs',
    '20s',
    duration(0),
    'how long a draining worker lets tasks finish',
    WORKER,
    "The default stays under Kubernetes' default termination grace of 30 s.",
  ),
  SONAR_SPOT_MARGIN: defaulted(
    'spotMarginMs',
    '10s',
    duration(0),
    'a spot drain ends this long before the notice time',
    WORKER,
  ),
  SONAR_WORKER_COMMANDS: defaulted(
    'workerCommands',
    'any',
    (raw) => parseCommandPolicy(String(raw)),
    'task commands a worker runs: any, none, or an allow-list',
    WORKER,
    "`any`; `none` (only the worker's own handler or `-- CMD`); or a comma-separated allow-list of absolute paths or names that a task's `command[0]` must equal exactly. A refused task fails for good. The default, `any`, is what workers did before the setting (docs/operations.md, Configuration).",
  ),
  SONAR_MAX_OUTPUT: defaulted('maxOutputBytes', '64MiB', size, 'largest task output', [
    'backend',
    'worker',
  ]),
  SONAR_MAX_INPUT: defaulted('maxInputBytes', '256KiB', size, 'largest task input', [
    'backend',
    'cli',
  ]),
  SONAR_MAX_OPEN_TASKS: defaulted(
    'maxOpenTasks',
    '100000',
    integer(1),
    'a submit past this many open (unsettled) tasks is refused',
    BACKEND,
    'Open tasks are those not yet settled: Pending, Published, Running, Finalizing. A submit that would take them over this many is refused with `overloaded`. Every backend holds every task in memory, with its input: the default suits a backend with 1 GiB of memory and inputs of a few KiB (docs/operations.md, Configuration).',
  ),
  SONAR_LOCK_TTL: defaulted(
    'lockTtlMs',
    '10s',
    duration(1),
    'leader lock TTL (more than the tick)',
    BACKEND,
  ),
  SONAR_REPLICAS: defaulted(
    'replicas',
    '1',
    integer(1, 5),
    'replicas of every stream and bucket',
    BACKEND,
    '1 to 5; 3 on a cluster.',
  ),
  SONAR_STRICT_DURABILITY: {
    ...optional(
      'strictDurability',
      flag,
      'refuse to start when the event log is not stored durably',
      BACKEND,
      'Set, every problem the durability check finds at start (fewer than 3 replicas on a cluster; a `sync_interval` other than `always` on nats-server 2.10 and later) stops the backend instead of being a warning (docs/operations.md, Durability). `sonar backend --strict-durability` sets it.',
    ),
    switch: true,
  },
  SONAR_EVENTS_MAX_BYTES: defaulted(
    'eventsMaxBytes',
    'auto',
    sizeOrAuto,
    'byte bound of the events stream; new work is refused near it',
    BACKEND,
    "New work is refused before the bound is reached (error `store_full`), so the registry, the leader lock and the tasks already running keep room. `auto`: half the account's JetStream storage limit when it has one, else no bound.",
  ),
  SONAR_STAGING_MAX_BYTES: defaulted(
    'stagingMaxBytes',
    '1GiB',
    size,
    'byte bound of the stream where secure-mode workers stage outputs',
    BACKEND,
    "Workers in secure mode stage outputs over the inline limit there until their `result` moves them into the object store. A full staging stream refuses new uploads (the task fails and is retried), never evicts. It is counted in chunks of 128 KiB, so nothing is reserved from the server's `max_file_store`.",
  ),
  SONAR_LOGS_MAX_BYTES: defaulted(
    'logsMaxBytes',
    '256MiB',
    size,
    "byte bound of the stream that keeps attempts' logs",
    BACKEND,
    "All attempts' stdout and stderr (`sonar logs`) together; when full, the oldest chunks go first (a log never refuses work). It is counted in chunks of 32 KiB, so nothing is reserved from the server's `max_file_store`; count it in the server's store next to the events stream's bound.",
  ),
  SONAR_HTTP_PORT: optional(
    'httpPort',
    port,
    'serve /metrics /healthz /readyz and the dashboard here; 0 = any free port',
    BACKEND,
    "The dashboard's API is served there too. Unset: no HTTP server.",
  ),
  SONAR_HTTP_HOST: optional(
    'httpHost',
    text,
    'address the HTTP server binds (not loopback: needs SONAR_HTTP_TOKEN)',
    BACKEND,
    'Unset: `127.0.0.1`. `0.0.0.0` opens it to the network (a Kubernetes probe, a remote Prometheus); a backend whose dashboard would be open beyond loopback without `SONAR_HTTP_TOKEN` refuses to start, unless `SONAR_DASHBOARD=off`.',
  ),
  SONAR_HTTP_TOKEN: optional(
    'httpToken',
    text,
    'token the dashboard requires',
    BACKEND,
    "Set, every request to the HTTP port (the dashboard, its API and SSE) needs it, as `Authorization: Bearer <token>` or the dashboard's login cookie.",
  ),
  SONAR_DASHBOARD: defaulted(
    'dashboard',
    'on',
    flag,
    'off: serve only /metrics /healthz /readyz',
    BACKEND,
    '`off` is the probes-only mode, safe on any address without a token; every other path is 404.',
  ),
  SONAR_SESSION_TTL: defaulted(
    'sessionTtlMs',
    '12h',
    duration(1),
    'how long a dashboard login lasts',
    BACKEND,
    'Sessions live in the `sonar_sessions` bucket, whose TTL this is, so every backend honours it and a logout.',
  ),
  SONAR_HTTP_SECURE_COOKIE: defaulted(
    'httpSecureCookie',
    'auto',
    flagOrAuto,
    'Secure session cookie: auto (behind TLS), true or false',
    BACKEND,
    '`auto`: `Secure` when the login arrived over TLS or with `X-Forwarded-Proto: https` (a TLS-terminating proxy).',
  ),
  SONAR_HTTP_TRUSTED_PROXIES: defaulted(
    'httpTrustedProxies',
    '0',
    integer(0, 16),
    'proxies appending to X-Forwarded-For in front of the HTTP port',
    BACKEND,
    "The client address (for the failed-login limits) is that many entries from the right of `X-Forwarded-For`. 0: the socket's peer address, and the header is ignored.",
  ),
  SONAR_RETENTION: defaulted(
    'retentionMs',
    '30d',
    duration(1),
    'runs finished longer ago are purged',
    BACKEND,
    "A run's events, results and outputs are purged. Attempts' logs and tasks' progress are kept this long from when they were written (the logs stream's and the progress bucket's max age).",
  ),
  SONAR_FULL_SWEEP: defaulted(
    'fullSweepMs',
    '1h',
    duration(1),
    'full sweep interval (one backend per interval)',
    BACKEND,
  ),
  SONAR_STOP_GRACE: defaulted(
    'stopGraceMs',
    '10s',
    duration(1),
    'how long a stop waits for each part before leaving it running',
    ['backend', 'worker'],
    "The parts: the reconciler, the finalizers, the sweeper, the API, a worker's tasks after release. A part still running then is left behind and the process exits; a finalization job in hand comes back after its lease.",
  ),
  SONAR_LOG_LEVEL: optional(
    'logLevel',
    logLevel,
    'lowest level logged: trace, debug, info, warn, error, fatal or silent',
    ALL,
    'Log lines are JSON on stderr. Unset: `info`; a worker started from the SDK (`new Worker`) logs from `warn` up.',
  ),
  SONAR_IMDS_URL: defaulted(
    'imdsUrl',
    'http://169.254.169.254',
    httpUrl,
    'instance metadata base URL (spot notices)',
    WORKER,
  ),
  SONAR_S3_ENDPOINT: optional(
    's3.endpoint',
    httpUrl,
    'S3/MinIO endpoint for outputs (all four SONAR_S3_* or none)',
    ALL,
    'An http(s) URL, e.g. `https://s3.eu-west-1.amazonaws.com`. Unset, outputs go to the `sonar_outputs` object store.',
  ),
  SONAR_S3_BUCKET: optional('s3.bucket', text, 'S3 bucket for outputs', ALL),
  SONAR_S3_ACCESS_KEY: optional('s3.accessKey', text, 'S3 access key', ALL),
  SONAR_S3_SECRET_KEY: optional('s3.secretKey', text, 'S3 secret key', ALL),
  SONAR_RESULTS_URL: {
    ...optional(
      'resultsUrl',
      parseResultsUrl,
      'PostgreSQL URL of the results sink (unset: the sonar_results KV bucket)',
      ['backend', 'cli'],
      "`postgres://user:password@host:5432/db?sslmode=verify-full`. Set, the finalizers upsert one row per task into the `<prefix>_results` table, which Sonar creates and migrates (docs/results-postgres.md), and `sonar results` reads it; each backend opens at most `SONAR_FINALIZERS` connections. `sslmode` and libpq's other URL parameters are read from the URL. The password is never logged: every message shows it as `***`.",
    ),
    mask: maskResultsUrl,
  },
  SONAR_ALLOW_SNAPSHOT_LOSS: optional(
    'allowSnapshotLoss',
    flag,
    'start even when the snapshot that purged runs live in is lost',
    BACKEND,
    'Runs whose events retention purged live only in the projection snapshot: with the snapshot unusable they are lost, and what is left of the events stream is replayed. Unset, such a backend refuses to start.',
  ),
} as const;

/** A `SONAR_*` variable. */
export type ConfigVariable = keyof typeof SETTINGS;

/** The parsed value of a row: always there with a default, else maybe undefined. */
export type ParsedSetting<R> =
  R extends DefaultedRow<infer T> ? T : R extends OptionalRow<infer T> ? T | undefined : never;
