/**
 * Every role's NATS permissions in secure (operator/JWT) mode, as data: the one definition
 * `sonar creds init` writes into the role users and the worker signing key's template
 * (docs/threat-model.md). Built from `names(prefix)` so a `SONAR_PREFIX` rename carries through.
 *
 * Wildcards match whole tokens only, so every bucket and stream is listed by name. No role
 * but the backend may subscribe to a shared inbox: each has its own inbox prefix
 * (`_INBOX_R.<role>`, workers `_INBOX_W.<workerId>`), set with nats.js `inboxPrefix`.
 */
import { names as namesOf, workerInboxPrefix } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';

/** Subjects a user may publish to and subscribe to. */
export interface PermissionSet {
  pub: string[];
  sub: string[];
}

/** The roles with a static user (a `.creds` file each). Workers get minted JWTs instead. */
export const STATIC_ROLES = ['backend', 'client', 'operator', 'supervisor', 'bootstrap'] as const;
export type StaticRole = (typeof STATIC_ROLES)[number];

/**
 * The static roles that live in the workers' account (workers-account.ts): those whose
 * credential sits on worker hosts. The rest live in the application account.
 */
export const WORKERS_ACCOUNT_ROLES: ReadonlySet<StaticRole> = new Set(['bootstrap', 'supervisor']);

/** What the worker signing key's template says in place of the worker id. */
export const WORKER_NAME_TEMPLATE = '{{name()}}';

/** The role of the scoped signing key that mints worker JWTs. */
export const WORKER_SIGNING_ROLE = 'sonar-worker';

/** A role's inbox prefix, for nats.js `inboxPrefix`. */
export const roleInboxPrefix = (role: StaticRole): string => `_INBOX_R.${role}`;

// A worker's inbox prefix is defined with the other names. 2.9.10 splices a template only
// as a whole subject token, hence `_INBOX_W.<id>` and not `_INBOX_W_<id>`.
export { workerInboxPrefix };

/**
 * Names secure mode adds to those of `streams/names.ts`: the enrollment and session buckets
 * and the staging stream for worker outputs. Derived from the prefix the same way.
 */
export interface SecureNames {
  /** The application account's name: the prefix in upper case (`SONAR`). */
  account: string;
  /** The workers' account's name (`SONAR_WORKERS`). */
  workersAccount: string;
  buckets: { enrollments: string; sessions: string };
  streams: { staging: string };
  subjects: {
    /** `<prefix>.stage.>`: every staged output. */
    stageAll: string;
    /** `<prefix>.api.w.<workerId>.>`: a worker's own verbs. */
    workerApiAll(workerId: string): string;
    /** `<prefix>.stage.<workerId>.>`: a worker's own staged outputs. */
    workerStageAll(workerId: string): string;
  };
}

export function secureNames(n: Names): SecureNames {
  const upper = n.prefix.toUpperCase().replace(/-/g, '_');
  return {
    account: upper,
    workersAccount: `${upper}_WORKERS`,
    buckets: { enrollments: n.buckets.enrollments, sessions: n.buckets.sessions },
    streams: { staging: n.streams.staging },
    subjects: {
      stageAll: n.subjects.stageAll,
      workerApiAll: (id) => `${n.prefix}.api.w.${id}.>`,
      workerStageAll: (id) => `${n.prefix}.stage.${id}.>`,
    },
  };
}

/** Every role's permissions; `worker` is the signing key's template, naming `{{name()}}`. */
export type RolePermissions = Record<StaticRole | 'worker', PermissionSet>;

const kvStream = (bucket: string): string => `KV_${bucket}`;
const objStream = (store: string): string => `OBJ_${store}`;

/**
 * Reads of the event log and its projection snapshot, the registry and the leader lock
 * (`status`, `tail`, `export`, `workers`). The snapshot holds nothing the log did not: it is
 * where the runs whose events retention purged still live, for `status` and `rerun`. Replaying a stream or listing KV keys needs an ephemeral consumer, hence
 * CONSUMER.CREATE and MSG.NEXT on those streams only; never CONSUMER.DELETE, which is an
 * ordinary subject that would let a reader delete the backend's durable consumers too
 * (ephemeral consumers go away by themselves once idle).
 */
function readerPub(n: Names): string[] {
  const events = n.streams.events;
  const snapshots = objStream(n.objectStores.snapshots);
  return [
    '$JS.API.INFO',
    '$JS.API.STREAM.INFO.*',
    '$JS.API.STREAM.NAMES',
    '$JS.API.STREAM.LIST',
    '$JS.API.CONSUMER.INFO.*.*',
    '$JS.API.CONSUMER.NAMES.*',
    '$JS.API.CONSUMER.LIST.*',
    `$JS.API.STREAM.MSG.GET.${events}`,
    `$JS.API.DIRECT.GET.${events}`,
    `$JS.API.DIRECT.GET.${events}.>`,
    `$JS.API.CONSUMER.CREATE.${events}`,
    `$JS.API.CONSUMER.CREATE.${events}.>`,
    `$JS.API.CONSUMER.MSG.NEXT.${events}.>`,
    `$JS.API.STREAM.MSG.GET.${snapshots}`,
    `$JS.API.DIRECT.GET.${snapshots}.>`,
    `$JS.API.CONSUMER.CREATE.${snapshots}.>`,
    // flow-control replies of the push consumers that list KV keys
    '$JS.FC.>',
  ];
}

/** The registry and the leader lock, for an operator (`sonar status`, `sonar workers`). */
function registryReadPub(n: Names): string[] {
  const workers = kvStream(n.buckets.workers);
  const locks = kvStream(n.buckets.locks);
  return [
    `$JS.API.STREAM.MSG.GET.${workers}`,
    `$JS.API.DIRECT.GET.${workers}.>`,
    `$JS.API.CONSUMER.CREATE.${workers}.>`,
    `$JS.API.STREAM.MSG.GET.${locks}`,
    `$JS.API.DIRECT.GET.${locks}.>`,
  ];
}

/** Results and outputs, for a client (`sonar results`, `submit --wait`). */
function resultsReadPub(n: Names): string[] {
  const results = kvStream(n.buckets.results);
  const outputs = objStream(n.objectStores.outputs);
  return [
    `$JS.API.STREAM.MSG.GET.${results}`,
    `$JS.API.DIRECT.GET.${results}.>`,
    `$JS.API.CONSUMER.CREATE.${results}.>`,
    `$JS.API.STREAM.MSG.GET.${outputs}`,
    `$JS.API.DIRECT.GET.${outputs}.>`,
    `$JS.API.CONSUMER.CREATE.${outputs}.>`,
  ];
}

/**
 * Attempts' logs and tasks' progress (`sonar logs`, `status`, `watch()`): logs by direct get
 * only, progress as a KV bucket (get, and a watch's consumer).
 */
function taskReportsReadPub(n: Names): string[] {
  const progress = kvStream(n.buckets.progress);
  return [
    `$JS.API.STREAM.INFO.${n.streams.logs}`,
    `$JS.API.DIRECT.GET.${n.streams.logs}`,
    `$JS.API.STREAM.MSG.GET.${progress}`,
    `$JS.API.DIRECT.GET.${progress}.>`,
    `$JS.API.CONSUMER.CREATE.${progress}.>`,
  ];
}

/** Builds every role's permissions for a prefix (default `sonar`). */
export function rolePermissions(n: Names = namesOf()): RolePermissions {
  const s = secureNames(n);
  const api = (verb: string): string => n.subjects.api(verb);
  const w = WORKER_NAME_TEMPLATE;
  const buckets = [
    n.buckets.workers,
    n.buckets.locks,
    n.buckets.schedule,
    n.buckets.finalizeErrors,
    n.buckets.results,
    n.buckets.progress,
    s.buckets.enrollments,
    s.buckets.sessions,
  ];
  const stores = [n.objectStores.outputs, n.objectStores.snapshots];
  const ownedData = [...buckets.map((b) => `$KV.${b}.>`), ...stores.map((o) => `$O.${o}.>`)];
  const workersKv = kvStream(n.buckets.workers);
  const dispatch = n.streams.dispatch;
  const jsApi = n.subjects.workerJsApi;
  const bootstrap: PermissionSet = {
    pub: [api('enroll')],
    sub: [`${roleInboxPrefix('bootstrap')}.>`],
  };
  return {
    // The backend owns every Sonar subject, stream, bucket and consumer; it answers requests
    // on any role's or worker's inbox and reads only its own.
    backend: {
      pub: [
        `${n.prefix}.>`,
        '$JS.API.>',
        ...ownedData,
        '_INBOX_R.>',
        '_INBOX_W.>',
        // answers to the workers' account, on the reply subjects its service imports make
        '_R_.>',
        // acks of its own consumers (finalizer, advisories) and flow control of push consumers
        '$JS.ACK.>',
        '$JS.FC.>',
      ],
      sub: [
        `${n.prefix}.>`,
        '$JS.API.>',
        ...ownedData,
        `${roleInboxPrefix('backend')}.>`,
        // MAX_DELIVERIES advisories, when watched live
        '$JS.EVENT.ADVISORY.>',
      ],
    },
    // CI jobs and the SDK's submit(): submit, cancel, and read runs and results.
    client: {
      pub: [
        api('submit.*'),
        api('cancel'),
        ...readerPub(n),
        ...resultsReadPub(n),
        ...taskReportsReadPub(n),
      ],
      sub: [`${roleInboxPrefix('client')}.>`],
    },
    // Dashboards and `status`, `tail`, `export`, `workers`: reads. Its writes are requests a
    // backend judges and carries out: cancel, rerun (a submit), poisoned retry and cancel,
    // sweep, revoke, schedules; never an append of its own.
    operator: {
      pub: [
        api('revoke'),
        api('cancel'),
        api('submit.*'),
        api('poisoned.*'),
        api('sweep'),
        api('schedule.*'),
        ...readerPub(n),
        ...registryReadPub(n),
        ...taskReportsReadPub(n),
      ],
      sub: [
        // live tail of events (core NATS)
        n.subjects.eventsAll,
        `${roleInboxPrefix('operator')}.>`,
      ],
    },
    // `sonar workers` / `sonar dev`: reports its children's ends; the children inherit its
    // credential and enroll with it, through the bootstrap inbox prefix.
    supervisor: {
      pub: [...bootstrap.pub, api('exited')],
      sub: [...bootstrap.sub, `${roleInboxPrefix('supervisor')}.>`],
    },
    // The fleet credential: enroll only. Its replies carry JWTs, useless without the seed
    // that stays in the worker, so a shared inbox prefix leaks nothing usable.
    bootstrap,
    // The template of the scoped worker signing key: `{{name()}}` is the worker id, which
    // the minting code validates (the server splices it raw). Workers live in the workers'
    // account, which reaches JetStream under its own API prefix (workers-account.ts).
    worker: {
      pub: [
        s.subjects.workerApiAll(w),
        `${jsApi}.$KV.${n.buckets.workers}.${w}`,
        `${jsApi}.DIRECT.GET.${workersKv}.$KV.${n.buckets.workers}.${w}`,
        `${jsApi}.STREAM.INFO.${workersKv}`,
        // Any worker may ack or nak another's delivery on a shared consumer: a nuisance, not
        // a leak (tasks are fenced by attempt id and token, not by ack).
        `${jsApi}.CONSUMER.INFO.${dispatch}.*`,
        `${jsApi}.CONSUMER.MSG.NEXT.${dispatch}.*`,
        `$JS.ACK.${dispatch}.>`,
        s.subjects.workerStageAll(w),
        `${jsApi}.STREAM.INFO.${s.streams.staging}`,
      ],
      sub: [`${workerInboxPrefix(w)}.>`, n.subjects.controlCancel],
    },
  };
}

/** The SYS account user that looks up and pushes account JWTs (revocations). */
export const SYS_PERMISSIONS: PermissionSet = {
  pub: ['$SYS.REQ.CLAIMS.UPDATE', '$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP'],
  sub: ['_INBOX.>'],
};
