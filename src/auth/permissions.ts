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
 * credential sits on worker hosts. Clients and operators live in the readers' account
 * (readers-account.ts); the backend alone in the application account.
 */
export const WORKERS_ACCOUNT_ROLES: ReadonlySet<StaticRole> = new Set(['bootstrap', 'supervisor']);

/** What the worker signing key's template says in place of the worker id. */
export const WORKER_NAME_TEMPLATE = '{{name()}}';

/**
 * The worker template's pull subject, `<prefix>.pull.{{name()}}.*`: a backend reads the
 * workers' account's template for it to know that workers pull through it.
 */
export const workerPullPattern = (n: Names): string => `${n.subjects.pull(WORKER_NAME_TEMPLATE)}.*`;

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
  /** The readers' account's name (`SONAR_READERS`): clients and operators. */
  readersAccount: string;
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
    readersAccount: `${upper}_READERS`,
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

/** The reader roles: clients and operators, in the readers' account. */
export const READER_ROLES = ['client', 'operator'] as const;
export type ReaderRole = (typeof READER_ROLES)[number];

/**
 * What a reader role reads: `streams` in full (info, message gets, consumers), and `single`
 * JetStream API subjects beyond those, named as in the application account (`$JS.API...`).
 *
 * Both roles read the event log and its projection snapshot (`status`, `tail`, `export`; the
 * snapshot holds nothing the log did not: it is where the runs whose events retention purged
 * still live), tasks' progress (a KV bucket), attempts' logs (by direct get only) and the
 * finalization queue's depth (`status`). A client reads results and outputs; an operator the
 * registry and the leader lock. Replays, listings and watches need ephemeral consumers,
 * created through a backend (readers-account.ts); never CONSUMER.DELETE.
 */
function readerReads(n: Names): Record<ReaderRole, { streams: string[]; single: string[] }> {
  const events = n.streams.events;
  const shared = {
    streams: [events, objStream(n.objectStores.snapshots), kvStream(n.buckets.progress)],
    single: [
      '$JS.API.INFO',
      `$JS.API.CONSUMER.MSG.NEXT.${events}.>`,
      `$JS.API.STREAM.INFO.${n.streams.finalize}`,
      `$JS.API.STREAM.INFO.${n.streams.logs}`,
      `$JS.API.DIRECT.GET.${n.streams.logs}`,
    ],
  };
  return {
    client: {
      ...shared,
      streams: [...shared.streams, kvStream(n.buckets.results), objStream(n.objectStores.outputs)],
    },
    operator: {
      ...shared,
      streams: [...shared.streams, kvStream(n.buckets.workers), kvStream(n.buckets.locks)],
    },
  };
}

/** Info, message gets and consumers (created through a backend) of one stream. */
function streamReadNeeds(stream: string): string[] {
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.>`,
    `$JS.API.CONSUMER.CREATE.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
  ];
}

/**
 * Each reader role's JetStream needs, named as in the application account: what the readers'
 * account imports, one by one. Every subject names its stream and ends in a literal token or
 * `>`, never `*` (an import mapped onto a subject ending in `*` crashes nats-server 2.9 when
 * an answer is aimed at it).
 */
export function readerJsNeeds(n: Names): Record<ReaderRole, string[]> {
  const reads = readerReads(n);
  const needs = (role: ReaderRole): string[] => [
    ...reads[role].streams.flatMap(streamReadNeeds),
    ...reads[role].single,
  ];
  return { client: needs('client'), operator: needs('operator') };
}

/**
 * A reader role's JetStream permissions, under the readers' prefix: three patterns per stream
 * it reads in full, so its JWT stays well inside the server's 4 KiB control line. They match
 * more than the imports (a `STREAM.DELETE.<stream>`, say), but the readers' account has no
 * JetStream of its own: a subject it does not import reaches no one.
 */
function readerJsPub(n: Names, role: ReaderRole): string[] {
  const api = n.subjects.readerJsApi;
  const reads = readerReads(n)[role];
  return [
    ...reads.streams.flatMap((s) => [
      `${api}.*.*.${s}`,
      `${api}.*.*.${s}.>`,
      `${api}.STREAM.MSG.GET.${s}`,
    ]),
    ...reads.single.map((s) => readerLocalSubject(n, s)),
  ];
}

/** Each reader role's API verbs (`<prefix>.api.<verb>`), asked of a backend. */
export function readerVerbs(n: Names): Record<ReaderRole, string[]> {
  const api = (verb: string): string => n.subjects.api(verb);
  return {
    client: [api('submit.*'), api('cancel')],
    // Its writes are requests a backend judges and carries out: never an append of its own.
    operator: [
      api('revoke'),
      api('cancel'),
      api('submit.*'),
      api('poisoned.*'),
      api('sweep'),
      api('schedule.*'),
    ],
  };
}

/** A `$JS.API...` subject as a reader publishes it: under the readers' API prefix. */
export function readerLocalSubject(n: Names, jsApiSubject: string): string {
  return `${n.subjects.readerJsApi}${jsApiSubject.slice('$JS.API'.length)}`;
}

/** A reader role's permissions: its verbs, its JetStream needs under its prefix, its inbox. */
function readerPermissions(n: Names, role: ReaderRole): PermissionSet {
  return {
    pub: [
      ...readerVerbs(n)[role],
      ...readerJsPub(n, role),
      // flow-control replies of the push consumers that read KV and object stores
      '$JS.FC.>',
      // how a reader finds its API prefix: answered "JetStream not enabled" by its own
      // account (streams/jetstream-api.ts)
      '$JS.API.INFO',
    ],
    // Its own inbox only: nothing else of the application account is delivered here (an
    // answer aimed at an imported stream would reach every subscriber of it).
    sub: [`${roleInboxPrefix(role)}.>`],
  };
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
    client: readerPermissions(n, 'client'),
    // Dashboards and `status`, `tail`, `export`, `workers`: reads, and requests a backend
    // judges: cancel, rerun (a submit), poisoned retry and cancel, sweep, revoke, schedules.
    operator: readerPermissions(n, 'operator'),
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
        // Pulls go through a backend, which checks the worker joined with the tag and bounds
        // its open pulls (src/backend/api/dispatch-pulls.ts); the worker never pulls the
        // consumers itself. Any worker may ack or nak another's delivery on a shared
        // consumer: a nuisance, not a leak (tasks are fenced by attempt id and token).
        workerPullPattern(n),
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
