import { configDefaults } from '../config.js';
import type { ConfigVariable } from '../config.js';

/** What each setting does, in a few words (DESIGN.md section 9); the README has the table. */
const WHAT: Partial<Record<ConfigVariable, string>> = {
  SONAR_NATS_URL: 'NATS server(s), comma-separated',
  SONAR_NATS_CREDS: 'NATS creds file',
  SONAR_NATS_USER: 'NATS user (with --nats-password)',
  SONAR_NATS_PASSWORD: 'NATS password',
  SONAR_NATS_TLS_CA: 'CA bundle to verify the NATS server (requires TLS)',
  SONAR_NATS_TLS_CERT: 'client certificate for mutual TLS (with --nats-tls-key)',
  SONAR_NATS_TLS_KEY: 'private key of the client certificate',
  SONAR_PREFIX: 'renames every subject, stream and bucket',
  SONAR_TICK: 'reconcile tick',
  SONAR_PUBLISH_TIMEOUT: 'a published task nobody started is requeued after this',
  SONAR_ORPHAN_AGE: 'a running task whose worker is gone is requeued after this',
  SONAR_PULSE_INTERVAL: 'worker pulse interval',
  SONAR_PULSE_TTL: 'registry TTL: a worker silent this long is gone',
  SONAR_RECOVERY_LIMIT: 'worker-lost recoveries within the window before a task goes Dead',
  SONAR_RECOVERY_WINDOW: 'window the recoveries are counted in',
  SONAR_CAPACITY_MULTIPLIER: 'capacity = floor(multiplier x slots)',
  SONAR_DISPATCH_BATCH: 'tasks a step places per turn of the water-fill',
  SONAR_FINALIZERS: 'finalization jobs at once per backend',
  SONAR_FINALIZE_LEASE: 'finalization job lease (ack_wait)',
  SONAR_FINALIZE_MAX_DELIVER: 'deliveries of a finalization job before it is poisoned',
  SONAR_DRAIN_GRACE: 'how long a draining worker lets tasks finish',
  SONAR_SPOT_MARGIN: 'a spot drain ends this long before the notice time',
  SONAR_WORKER_COMMANDS: 'task commands a worker runs: any, none, or an allow-list',
  SONAR_MAX_OUTPUT: 'largest task output',
  SONAR_MAX_INPUT: 'largest task input',
  SONAR_MAX_OPEN_TASKS: 'a submit past this many open (unsettled) tasks is refused',
  SONAR_LOCK_TTL: 'leader lock TTL (more than the tick)',
  SONAR_REPLICAS: 'replicas of every stream and bucket',
  SONAR_EVENTS_MAX_BYTES: 'byte bound of the events stream; new work is refused near it',
  SONAR_STAGING_MAX_BYTES: 'byte bound of the stream where secure-mode workers stage outputs',
  SONAR_HTTP_PORT: 'serve /metrics /healthz /readyz and the dashboard here; 0 = any free port',
  SONAR_HTTP_HOST: 'address the HTTP server binds (not loopback: needs SONAR_HTTP_TOKEN)',
  SONAR_HTTP_TOKEN: 'token the dashboard requires',
  SONAR_DASHBOARD: 'off: serve only /metrics /healthz /readyz',
  SONAR_SESSION_TTL: 'how long a dashboard login lasts',
  SONAR_HTTP_SECURE_COOKIE: 'Secure session cookie: auto (behind TLS), true or false',
  SONAR_HTTP_TRUSTED_PROXIES: 'proxies appending to X-Forwarded-For in front of the HTTP port',
  SONAR_RETENTION: 'runs finished longer ago are purged',
  SONAR_FULL_SWEEP: 'full sweep interval (one backend per interval)',
  SONAR_IMDS_URL: 'instance metadata base URL (spot notices)',
  SONAR_S3_ENDPOINT: 'S3/MinIO endpoint for outputs (all four SONAR_S3_* or none)',
  SONAR_S3_BUCKET: 'S3 bucket for outputs',
  SONAR_S3_ACCESS_KEY: 'S3 access key',
  SONAR_S3_SECRET_KEY: 'S3 secret key',
};

/** `--tick <value>`'s help: `reconcile tick (SONAR_TICK, default 2s)`. */
export function configHelp(v: ConfigVariable): string {
  const fallback = (configDefaults as Partial<Record<string, string>>)[v];
  const extra = fallback === undefined ? v : `${v}, default ${fallback}`;
  const what = WHAT[v];
  return what === undefined ? extra : `${what} (${extra})`;
}
