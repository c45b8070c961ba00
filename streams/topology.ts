import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { ConsumerConfig, StreamConfig } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { Names } from './names.js';

/** Settings the topology depends on; all durations in ms (converted to ns only here). */
export interface TopologyOptions {
  replicas: number;
  pulseTtlMs: number;
  lockTtlMs: number;
  finalizeLeaseMs: number;
  finalizeMaxDeliver: number;
  /**
   * The events stream's own byte bound (`max_bytes`, discard `new`); -1 for none. Resolved
   * from `SONAR_EVENTS_MAX_BYTES` by the backend (src/backend/storage/store-room.ts).
   */
  eventsMaxBytes: number;
  /**
   * The dashboard's session lifetime: the `sessions` bucket's TTL. Resolved from
   * `SONAR_SESSION_TTL` by the backend.
   * @defaultValue {@link DEFAULT_SESSION_TTL_MS}
   */
  sessionTtlMs?: number;
  /**
   * The staging stream's byte bound (`SONAR_STAGING_MAX_BYTES`).
   * @defaultValue {@link DEFAULT_STAGING_MAX_BYTES}
   */
  stagingMaxBytes?: number;
  /**
   * All attempts' logs at most (`SONAR_LOGS_MAX_BYTES`), as a count of chunks.
   * @defaultValue {@link DEFAULT_LOGS_MAX_BYTES}
   */
  logsMaxBytes?: number;
  /**
   * How long attempts' logs and tasks' progress are kept: `SONAR_RETENTION`, resolved by the
   * backend. Unset, they are bounded by count only.
   */
  retentionMs?: number;
}

/** A dashboard login lasts this long unless `SONAR_SESSION_TTL` says otherwise. */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60_000;

export const DEFAULT_TOPOLOGY_OPTIONS: TopologyOptions = {
  replicas: 1,
  pulseTtlMs: 15_000,
  lockTtlMs: 10_000,
  finalizeLeaseMs: 30_000,
  finalizeMaxDeliver: 6,
  eventsMaxBytes: -1,
};

/** Window in which a retried publish with the same `Nats-Msg-Id` is stored once. */
export const DEDUPE_WINDOW_MS = 2 * 60_000;
/** The bytes of one staged output chunk (the object store's own chunk size). */
export const STAGE_CHUNK_BYTES = 128 * 1024;
/** All staged outputs at once, unless `SONAR_STAGING_MAX_BYTES` says otherwise. */
export const DEFAULT_STAGING_MAX_BYTES = 1024 ** 3;
/** A staged output not moved by then was abandoned (its worker died before `result`). */
export const STAGING_MAX_AGE_MS = 6 * 3_600_000;
/**
 * One attempt's log chunk at most (the worker sends the tail of what it gathered since its
 * last flush), and the chunks kept per attempt: the newest 4 MiB of each attempt's log.
 */
export const LOG_CHUNK_BYTES = 32 * 1024;
export const LOG_CHUNKS_PER_ATTEMPT = 128;
/** All attempts' logs, unless `SONAR_LOGS_MAX_BYTES` says otherwise. */
export const DEFAULT_LOGS_MAX_BYTES = 256 * 1024 ** 2;
/** A dispatch lease: an unstarted task comes back to another puller after this. */
export const DISPATCH_ACK_WAIT_MS = 60_000;
/** Max jobs a finalizer consumer may hold unacked: jobs waiting out a nak delay count too. */
export const FINALIZE_MAX_ACK_PENDING = 10_000;

export interface KvSpec {
  bucket: string;
  /** Bucket TTL (stream max_age) in ms; 0 for none. On 2.9 there is no per-key TTL. */
  ttlMs: number;
  history: number;
  /**
   * Whether a `Nats-Rollup` header may purge the bucket's stream. Off for buckets that
   * untrusted processes write: permissions cannot see headers, and a rollup of `all` on any
   * key's subject wipes every key. `kv.put` and `kv.delete` need no rollups.
   */
  rollups: boolean;
}

export interface Topology {
  streams: Partial<StreamConfig>[];
  kv: KvSpec[];
  objectStores: string[];
  consumers: { stream: string; config: Partial<ConsumerConfig> }[];
}

/**
 * DESIGN.md section 2 as data. Each entry says why it is set as it is.
 */
export function topology(n: Names, opts: TopologyOptions): Topology {
  const common = { storage: StorageType.File, num_replicas: opts.replicas };
  return {
    streams: [
      {
        // The source of truth. Limits retention, kept whole: no per-subject limit, since every
        // event of an aggregate is needed for replay. Dedupe by Nats-Msg-Id = event id for 2 min.
        // A byte bound of its own with discard `new`: the log fills before the server's store,
        // so the registry, the lock and the queues (other streams) keep room to write, and a
        // full log refuses a write instead of dropping its oldest events. The backend admits
        // new work only while the remaining events of open tasks still fit under it.
        ...common,
        name: n.streams.events,
        subjects: [n.subjects.eventsAll],
        retention: RetentionPolicy.Limits,
        max_msgs_per_subject: -1,
        max_bytes: opts.eventsMaxBytes,
        discard: DiscardPolicy.New,
        duplicate_window: nanos(DEDUPE_WINDOW_MS),
        allow_direct: true,
      },
      {
        // Work queue per tag: a message is gone once a worker acks it after `start`.
        ...common,
        name: n.streams.dispatch,
        subjects: [n.subjects.dispatchAll],
        retention: RetentionPolicy.Workqueue,
        duplicate_window: nanos(DEDUPE_WINDOW_MS),
      },
      {
        // Finalization jobs; the msg id `fin.<runId>.<taskId>.<attemptId>.<n>` dedupes a
        // retried enqueue for 2 min, and the finalizer makes older duplicates harmless.
        ...common,
        name: n.streams.finalize,
        subjects: [n.subjects.finalizeAll],
        retention: RetentionPolicy.Workqueue,
        duplicate_window: nanos(DEDUPE_WINDOW_MS),
      },
      {
        // Poisoned jobs with their error history, kept for inspection (limits retention).
        ...common,
        name: n.streams.poison,
        subjects: [n.subjects.poisonAll],
        retention: RetentionPolicy.Limits,
        max_msgs_per_subject: -1,
      },
      {
        // Outputs over the inline limit that workers stage, one subject per attempt, for the
        // backend to move into the object store at `result` (src/storage/staged-output.ts):
        // the object store's own writes need rollups and purges that would let any writer
        // wipe it. Bounded: chunks of STAGE_CHUNK_BYTES, a bound with discard `new` so a
        // worker that fills it is refused rather than evicting others' outputs, and an age
        // that clears what a dead worker left. The bound is a message count (of chunks at most
        // max_msg_size each), not max_bytes: the server reserves max_bytes from its store up
        // front, and a small store would refuse the stream.
        ...common,
        name: n.streams.staging,
        subjects: [n.subjects.stageAll],
        retention: RetentionPolicy.Limits,
        max_msgs: Math.max(
          1,
          Math.ceil((opts.stagingMaxBytes ?? DEFAULT_STAGING_MAX_BYTES) / STAGE_CHUNK_BYTES),
        ),
        max_msg_size: STAGE_CHUNK_BYTES + 4 * 1024,
        max_age: nanos(STAGING_MAX_AGE_MS),
        discard: DiscardPolicy.New,
        allow_rollup_hdrs: false,
      },
      {
        // Each attempt's stdout and stderr (src/storage/task-logs.ts): written only by backends,
        // for the attempt's holder, so a worker cannot write another's. A log is kept as long
        // as a finished run; the newest chunks of each attempt and of all attempts are kept
        // (discard `old`): a log is an aid, never a reason to refuse work. Bounded by message
        // counts of chunks at most max_msg_size each, as staging is, and not by max_bytes,
        // which the server reserves up front.
        ...common,
        name: n.streams.logs,
        subjects: [n.subjects.logsAll],
        retention: RetentionPolicy.Limits,
        max_msgs: Math.max(
          1,
          Math.ceil((opts.logsMaxBytes ?? DEFAULT_LOGS_MAX_BYTES) / LOG_CHUNK_BYTES),
        ),
        max_msgs_per_subject: LOG_CHUNKS_PER_ATTEMPT,
        max_msg_size: LOG_CHUNK_BYTES * 2 + 4 * 1024,
        max_age: nanos(opts.retentionMs ?? 0),
        discard: DiscardPolicy.Old,
        allow_rollup_hdrs: false,
        allow_direct: true,
      },
      {
        // MAX_DELIVERIES advisories are fire-and-forget: capture them, so that a poison
        // decision is not lost while no backend is up. Work queue: handled once, then gone.
        ...common,
        name: n.streams.advisories,
        subjects: [n.subjects.maxDeliveriesAdvisory],
        retention: RetentionPolicy.Workqueue,
      },
    ],
    kv: [
      // The live registry: a key lives while its worker pulses; the bucket TTL expires it.
      { bucket: n.buckets.workers, ttlMs: opts.pulseTtlMs, history: 1, rollups: false },
      // The leader lock: create = SET NX, update(revision) renews, the TTL releases.
      { bucket: n.buckets.locks, ttlMs: opts.lockTtlMs, history: 1, rollups: true },
      // Periodic jobs claim their turn by compare-and-set of {lastAt, by}; no TTL.
      { bucket: n.buckets.schedule, ttlMs: 0, history: 1, rollups: true },
      // Each failed finalization attempt, keyed <runId>.<taskId>.<attemptId>.
      { bucket: n.buckets.finalizeErrors, ttlMs: 0, history: 10, rollups: true },
      // The default results sink: one record per task, upserted.
      { bucket: n.buckets.results, ttlMs: 0, history: 1, rollups: true },
      // The latest progress of each task (src/storage/task-progress.ts), kept out of the event
      // log: it would race the result on the task's subject and grow the log. Written only by
      // backends, kept as long as a finished run.
      {
        bucket: n.buckets.progress,
        ttlMs: opts.retentionMs ?? 0,
        history: 1,
        rollups: false,
      },
      // Which public key holds each worker id (secure mode); kept a week past its last
      // renewal, far longer than any credential lives.
      { bucket: n.buckets.enrollments, ttlMs: ENROLLMENT_TTL_MS, history: 1, rollups: false },
      // Dashboard logins, keyed by the hash of the cookie's random id. Shared, so a logout
      // (a delete) holds on every backend; the bucket TTL is the session lifetime, counted
      // from the login (a session is written once).
      {
        bucket: n.buckets.sessions,
        ttlMs: opts.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS,
        history: 1,
        rollups: false,
      },
    ],
    objectStores: [n.objectStores.outputs, n.objectStores.snapshots],
    consumers: [{ stream: n.streams.finalize, config: finalizerConsumer(n, opts) }],
  };
}

/** How long an enrollment outlives its last renewal. */
export const ENROLLMENT_TTL_MS = 7 * 24 * 3_600_000;

/**
 * The finalizer pool's one durable consumer. The lease is ack_wait, renewed by working().
 * No `backoff`: on 2.9 it overwrites ack_wait with backoff[0]; the finalizer passes each delay
 * to nak(ms) instead. max_ack_pending is large so jobs waiting out a delay never stall others.
 */
export function finalizerConsumer(n: Names, opts: TopologyOptions): Partial<ConsumerConfig> {
  return {
    durable_name: n.consumers.finalizer,
    filter_subject: n.subjects.finalizeAll,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(opts.finalizeLeaseMs),
    max_deliver: opts.finalizeMaxDeliver,
    max_ack_pending: FINALIZE_MAX_ACK_PENDING,
  };
}

/** `dispatch_<tag>`: pull, explicit ack, ack_wait 60 s, deliver all (DESIGN.md section 2). */
export function dispatchConsumer(n: Names, tag: string): Partial<ConsumerConfig> {
  return {
    durable_name: n.consumers.dispatch(tag),
    filter_subject: n.subjects.dispatch(tag),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(DISPATCH_ACK_WAIT_MS),
  };
}
