/**
 * Every `SONAR_*` setting, one row each (DESIGN.md section 9, in its order): its variable, its
 * field in {@link SonarConfig}, its default, its parser, what it does and which processes
 * read it. Environment parsing, CLI flags, `--help` text and docs/configuration.md are all
 * derived from this table.
 */
import {
  duration,
  flag,
  flagOrAuto,
  httpUrl,
  integer,
  natsUrl,
  port,
  positiveNumber,
  prefix,
  size,
  sizeOrAuto,
  text,
} from './config-parsers.js';
import type { Parser } from './config-parsers.js';
import { parseCommandPolicy } from './worker/command-policy.js';

/** The processes a setting matters to. `cli`: the one-shot verbs and the client SDK. */
export type SettingUser = 'backend' | 'worker' | 'cli';

interface RowBase<T> {
  /** The {@link SonarConfig} field (`s3.bucket`: a field of `s3`). */
  field: string;
  parse: Parser<T>;
  /** What it does, in a few words: the `--help` text and the reference's description. */
  doc: string;
  usedBy: readonly SettingUser[];
}

/** A setting with a default: its parsed value is always there. */
export interface DefaultedRow<T> extends RowBase<T> {
  default: string;
}

/** A setting without a default: unset means off, or nothing given. */
export interface OptionalRow<T> extends RowBase<T> {
  default?: undefined;
}

export type SettingRow<T> = DefaultedRow<T> | OptionalRow<T>;

const ALL: readonly SettingUser[] = ['backend', 'worker', 'cli'];
const BACKEND: readonly SettingUser[] = ['backend'];
const WORKER: readonly SettingUser[] = ['worker'];

const defaulted = <T>(
  field: string,
  value: string,
  parse: Parser<T>,
  doc: string,
  usedBy: readonly SettingUser[],
): DefaultedRow<T> => ({ field, default: value, parse, doc, usedBy });

const optional = <T>(
  field: string,
  parse: Parser<T>,
  doc: string,
  usedBy: readonly SettingUser[],
): OptionalRow<T> => ({ field, parse, doc, usedBy });

export const SETTINGS = {
  SONAR_NATS_URL: defaulted(
    'natsUrl',
    'nats://127.0.0.1:4222',
    natsUrl,
    'NATS server(s), comma-separated',
    ALL,
  ),
  SONAR_NATS_CREDS: optional('natsCreds', text, 'NATS creds file', ALL),
  SONAR_NATS_USER: optional('natsUser', text, 'NATS user (with --nats-password)', ALL),
  SONAR_NATS_PASSWORD: optional('natsPassword', text, 'NATS password', ALL),
  SONAR_NATS_TLS_CA: optional(
    'natsTlsCa',
    text,
    'CA bundle to verify the NATS server (requires TLS)',
    ALL,
  ),
  SONAR_NATS_TLS_CERT: optional(
    'natsTlsCert',
    text,
    'client certificate for mutual TLS (with --nats-tls-key)',
    ALL,
  ),
  SONAR_NATS_TLS_KEY: optional('natsTlsKey', text, 'private key of the client certificate', ALL),
  SONAR_NATS_INBOX_PREFIX: optional(
    'natsInboxPrefix',
    text,
    "where this process's NATS replies arrive (a role's creds file sets _INBOX_R.<role>)",
    ALL,
  ),
  SONAR_WORKER_SIGNING_KEY: optional(
    'workerSigningKey',
    text,
    "seed of the workers' scoped signing key: set, the backend runs in secure mode",
    BACKEND,
  ),
  SONAR_WORKER_ACCOUNT_JWT: optional(
    'workerAccountJwt',
    text,
    "JWT of the workers' account that worker credentials are minted into",
    BACKEND,
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
  ),
  SONAR_TICK: defaulted('tickMs', '2s', duration(1), 'reconcile tick', BACKEND),
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
  ),
  SONAR_PULSE_INTERVAL: defaulted(
    'pulseIntervalMs',
    '5s',
    duration(1),
    'worker pulse interval (workers learn it from join)',
    BACKEND,
  ),
  SONAR_PULSE_TTL: defaulted(
    'pulseTtlMs',
    '15s',
    duration(1),
    'registry TTL: a worker silent this long is gone',
    BACKEND,
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
  ),
  SONAR_DISPATCH_BATCH: defaulted(
    'dispatchBatch',
    '8',
    integer(1),
    'tasks a step places per turn of the water-fill',
    BACKEND,
  ),
  SONAR_FINALIZERS: defaulted(
    'finalizers',
    '4',
    integer(1),
    'finalization jobs at once per backend',
    BACKEND,
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
  ),
  SONAR_EVENTS_MAX_BYTES: defaulted(
    'eventsMaxBytes',
    'auto',
    sizeOrAuto,
    'byte bound of the events stream; new work is refused near it',
    BACKEND,
  ),
  SONAR_STAGING_MAX_BYTES: defaulted(
    'stagingMaxBytes',
    '1GiB',
    size,
    'byte bound of the stream where secure-mode workers stage outputs',
    BACKEND,
  ),
  SONAR_HTTP_PORT: optional(
    'httpPort',
    port,
    'serve /metrics /healthz /readyz and the dashboard here; 0 = any free port',
    BACKEND,
  ),
  SONAR_HTTP_HOST: optional(
    'httpHost',
    text,
    'address the HTTP server binds (not loopback: needs SONAR_HTTP_TOKEN)',
    BACKEND,
  ),
  SONAR_HTTP_TOKEN: optional('httpToken', text, 'token the dashboard requires', BACKEND),
  SONAR_DASHBOARD: defaulted(
    'dashboard',
    'on',
    flag,
    'off: serve only /metrics /healthz /readyz',
    BACKEND,
  ),
  SONAR_SESSION_TTL: defaulted(
    'sessionTtlMs',
    '12h',
    duration(1),
    'how long a dashboard login lasts',
    BACKEND,
  ),
  SONAR_HTTP_SECURE_COOKIE: defaulted(
    'httpSecureCookie',
    'auto',
    flagOrAuto,
    'Secure session cookie: auto (behind TLS), true or false',
    BACKEND,
  ),
  SONAR_HTTP_TRUSTED_PROXIES: defaulted(
    'httpTrustedProxies',
    '0',
    integer(0, 16),
    'proxies appending to X-Forwarded-For in front of the HTTP port',
    BACKEND,
  ),
  SONAR_RETENTION: defaulted(
    'retentionMs',
    '30d',
    duration(1),
    'runs finished longer ago are purged',
    BACKEND,
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
  ),
  SONAR_S3_BUCKET: optional('s3.bucket', text, 'S3 bucket for outputs', ALL),
  SONAR_S3_ACCESS_KEY: optional('s3.accessKey', text, 'S3 access key', ALL),
  SONAR_S3_SECRET_KEY: optional('s3.secretKey', text, 'S3 secret key', ALL),
  SONAR_ALLOW_SNAPSHOT_LOSS: optional(
    'allowSnapshotLoss',
    flag,
    'start even when the snapshot that purged runs live in is lost',
    BACKEND,
  ),
} as const;

/** A `SONAR_*` variable. */
export type ConfigVariable = keyof typeof SETTINGS;

/** The parsed value of a row: always there with a default, else maybe undefined. */
export type ParsedSetting<R> =
  R extends DefaultedRow<infer T> ? T : R extends OptionalRow<infer T> ? T | undefined : never;
