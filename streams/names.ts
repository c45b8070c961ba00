/**
 * Every subject, stream, consumer, bucket and object store name (DESIGN.md section 2), built
 * in this one place from the prefix. `SONAR_PREFIX=p` gives `p.events.>`, `P_EVENTS` and
 * `p_workers`; consumer names live inside their stream and keep no prefix.
 */
import { ValidationError } from '../actors/errors.js';
import type { AggregateRef } from '../actors/events.js';
export interface Names {
  prefix: string;
  streams: {
    events: string;
    dispatch: string;
    finalize: string;
    poison: string;
    advisories: string;
    /** Outputs workers stage for the backend to move into the object store (secure mode). */
    staging: string;
    /** Each attempt's stdout and stderr, one subject per attempt. */
    logs: string;
  };
  buckets: {
    workers: string;
    locks: string;
    schedule: string;
    finalizeErrors: string;
    results: string;
    /** Which public key may act under each worker id (secure mode). */
    enrollments: string;
    sessions: string;
    /** The latest progress of each task, keyed `<runId>.<taskId>`. */
    progress: string;
  };
  objectStores: { outputs: string; snapshots: string };
  consumers: { dispatch(tag: string): string; finalizer: string };
  subjects: {
    eventsAll: string;
    run(runId: string): string;
    step(runId: string, stepId: string): string;
    task(runId: string, taskId: string): string;
    worker(workerId: string): string;
    system(name: string): string;
    /** `<prefix>.events.schedule.<name>`: one schedule's events. */
    schedule(name: string): string;
    /** `<prefix>.events.task.<runId>.*` and friends, for reading one run. */
    runAll(runId: string): string[];
    dispatch(tag: string): string;
    dispatchAll: string;
    /**
     * `<prefix>.pull.<workerId>`: a worker asks `<this>.<tag>` for a pull of one tag's
     * dispatch messages, which a backend makes for it (secure mode). The id in the subject
     * is the caller's identity: in secure mode only that worker may publish there.
     */
    pull(workerId: string): string;
    pullAll: string;
    finalize(runId: string, taskId: string): string;
    finalizeAll: string;
    /** A batch of inline-output jobs (streams/queues.ts). */
    finalizeBatch(id: string): string;
    finalizeBatchAll: string;
    poison(runId: string, taskId: string): string;
    poisonAll: string;
    api(verb: string): string;
    apiAll: string;
    /**
     * `<prefix>.api.w.<workerId>.<verb>`: a worker's own verbs. The id in the subject is
     * the caller's identity: in secure mode only that worker may publish there.
     */
    workerApi(workerId: string, verb: string): string;
    controlCancel: string;
    /**
     * `<prefix>.stage.<workerId>.<attemptId>`: one attempt's staged output. The id in the
     * subject is the writer's identity: in secure mode only that worker may publish there.
     */
    stage(workerId: string, attemptId: string): string;
    stageAll: string;
    /** `<prefix>.logs.<runId>.<taskId>.<attempt>`: one attempt's stdout and stderr. */
    logs(runId: string, taskId: string, attempt: number): string;
    logsAll: string;
    /**
     * `<prefix>.js.API`: the JetStream API prefix in the workers' account (secure mode), where
     * the application account's JetStream is imported; nats.js `apiPrefix`.
     */
    workerJsApi: string;
    /**
     * `<prefix>.rjs.API`: the JetStream API prefix in the readers' account (secure mode),
     * where clients and operators reach the application account's JetStream for reading.
     */
    readerJsApi: string;
    /**
     * `<prefix>.reader.consumer.<stream>[.<name>[.<filter>]]`: a reader's consumer create,
     * which a backend checks and passes on to JetStream (the readers' account imports it as
     * `CONSUMER.CREATE` under its API prefix).
     */
    readerConsumerCreate: string;
    /** `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.>` for the finalize stream. */
    maxDeliveriesAdvisory: string;
  };
}

/**
 * Where a worker's NATS replies and deliveries arrive in secure mode: its credential may
 * subscribe there and nowhere else under `_INBOX`, so no worker reads another's. Not under
 * the Sonar prefix: inboxes belong to the account.
 */
export const workerInboxPrefix = (workerId: string): string => `_INBOX_W.${workerId}`;

/**
 * The token of batch subjects where a single job's run id stands. It is a valid run id too:
 * the subject is only where a batch is kept, and every reader tells a batch by its payload.
 */
export const FINALIZE_BATCH_TOKEN = '_batch';

/**
 * The one rule for `SONAR_PREFIX`: lowercase letters, digits, `_` and `-`, starting with a
 * letter, at most 31 characters.
 */
export const PREFIX_RE = /^[a-z][a-z0-9_-]{0,30}$/;

export function names(prefix = 'sonar'): Names {
  if (!PREFIX_RE.test(prefix)) {
    throw new ValidationError(
      `prefix must match ${String(PREFIX_RE)}, got ${JSON.stringify(prefix)}`,
    );
  }
  const upper = prefix.toUpperCase().replace(/-/g, '_');
  const ev = `${prefix}.events`;
  const finalizeStream = `${upper}_FINALIZE`;
  return {
    prefix,
    streams: {
      events: `${upper}_EVENTS`,
      dispatch: `${upper}_DISPATCH`,
      finalize: finalizeStream,
      poison: `${upper}_POISON`,
      advisories: `${upper}_ADVISORIES`,
      staging: `${upper}_STAGING`,
      logs: `${upper}_LOGS`,
    },
    buckets: {
      workers: `${prefix}_workers`,
      locks: `${prefix}_locks`,
      schedule: `${prefix}_schedule`,
      finalizeErrors: `${prefix}_finalize_errors`,
      results: `${prefix}_results`,
      enrollments: `${prefix}_enrollments`,
      sessions: `${prefix}_sessions`,
      progress: `${prefix}_progress`,
    },
    objectStores: { outputs: `${prefix}_outputs`, snapshots: `${prefix}_snapshots` },
    consumers: { dispatch: (tag) => `dispatch_${tag}`, finalizer: 'finalizer' },
    subjects: {
      eventsAll: `${ev}.>`,
      run: (runId) => `${ev}.run.${runId}`,
      step: (runId, stepId) => `${ev}.step.${runId}.${stepId}`,
      task: (runId, taskId) => `${ev}.task.${runId}.${taskId}`,
      worker: (workerId) => `${ev}.worker.${workerId}`,
      system: (name) => `${ev}.system.${name}`,
      schedule: (name) => `${ev}.schedule.${name}`,
      runAll: (runId) => [`${ev}.run.${runId}`, `${ev}.step.${runId}.*`, `${ev}.task.${runId}.*`],
      dispatch: (tag) => `${prefix}.dispatch.${tag}`,
      dispatchAll: `${prefix}.dispatch.>`,
      pull: (workerId) => `${prefix}.pull.${workerId}`,
      pullAll: `${prefix}.pull.*.*`,
      finalize: (runId, taskId) => `${prefix}.finalize.${runId}.${taskId}`,
      finalizeAll: `${prefix}.finalize.>`,
      finalizeBatch: (id) => `${prefix}.finalize.${FINALIZE_BATCH_TOKEN}.${id}`,
      finalizeBatchAll: `${prefix}.finalize.${FINALIZE_BATCH_TOKEN}.*`,
      poison: (runId, taskId) => `${prefix}.poison.${runId}.${taskId}`,
      poisonAll: `${prefix}.poison.>`,
      api: (verb) => `${prefix}.api.${verb}`,
      apiAll: `${prefix}.api.>`,
      workerApi: (workerId, verb) => `${prefix}.api.w.${workerId}.${verb}`,
      controlCancel: `${prefix}.control.cancel`,
      stage: (workerId, attemptId) => `${prefix}.stage.${workerId}.${attemptId}`,
      stageAll: `${prefix}.stage.>`,
      logs: (runId, taskId, attempt) => `${prefix}.logs.${runId}.${taskId}.${attempt}`,
      logsAll: `${prefix}.logs.>`,
      workerJsApi: `${prefix}.js.API`,
      readerJsApi: `${prefix}.rjs.API`,
      readerConsumerCreate: `${prefix}.reader.consumer`,
      maxDeliveriesAdvisory: `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${finalizeStream}.>`,
    },
  };
}

/**
 * Subjects that streams, buckets or JetStream own (or may): never a requester's inbox. A
 * backend answers no request whose reply names one, so no caller makes it write into a stream.
 */
export function isStoredSubject(n: Names, subject: string): boolean {
  return subject.startsWith(`${n.prefix}.`) || /^\$(KV|O|JS|SYS)\./.test(subject);
}

/** The events subject of an aggregate, from its projection key (`<runId>.<id>`, `<workerId>`). */
export function aggregateSubject(n: Names, ref: AggregateRef): string {
  const dot = ref.key.indexOf('.');
  const [runId, id] = dot < 0 ? [ref.key, ''] : [ref.key.slice(0, dot), ref.key.slice(dot + 1)];
  switch (ref.kind) {
    case 'task':
      return n.subjects.task(runId, id);
    case 'step':
      return n.subjects.step(runId, id);
    case 'run':
      return n.subjects.run(ref.key);
    case 'worker':
      return n.subjects.worker(ref.key);
    case 'system':
      return n.subjects.system(ref.key);
    case 'schedule':
      return n.subjects.schedule(ref.key);
  }
}
