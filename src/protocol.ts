import { z } from 'zod';
import { LOG_CHUNK_BYTES } from '../streams/topology.js';
import { inputDepthProblem } from './limits.js';
import { MAX_SLOTS_CAP, MAX_WORKER_TAGS } from './pulse-size.js';
import { delayField, notBeforeField, priorityField, retryField } from './run-file-placement.js';
import { ScheduleVerb, scheduleRequestSchemas } from './schedules/schedule-protocol.js';

/**
 * The worker and client protocol of DESIGN.md section 6, as zod schemas: the backend
 * validates every request with them, and the TypeScript worker and client build requests
 * from their types. A worker in another language needs only DESIGN.md; this file is the
 * executable form of the same contract.
 */
const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match ^[A-Za-z0-9_-]{1,64}$');
const iso = z.iso.datetime({ offset: true });

/**
 * A task input: any JSON, nested at most MAX_INPUT_DEPTH levels. Checked here, in the schema
 * the client and the backend both parse with, before anything serializes it (JSON.stringify
 * recurses, and would overflow the stack on an input nested thousands of levels deep).
 */
const taskInput = z.unknown().superRefine((value, ctx) => {
  const problem = inputDepthProblem(value);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

/**
 * The run file's hash in `submit.begin`. It becomes part of event ids, and so of the
 * `Nats-Msg-Id` header, where a CR or LF makes the publish throw: letters, digits, `_`, `-`
 * only (a sha256 in hex, as the client sends, fits).
 */
const fileHash = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,128}$/, 'must match ^[A-Za-z0-9_-]{1,128}$ (e.g. a sha256 in hex)');

/** A progress value's JSON at most: a fraction, a count, a short message. */
export const PROGRESS_MAX_BYTES = 1024;
/** Pieces of one log chunk at most: a flush of output interleaved between the two streams. */
export const LOG_PARTS_MAX = 256;

const logPart = z.strictObject({ stream: z.enum(['stdout', 'stderr']), text: z.string() });

const progressValue = z.unknown().superRefine((value, ctx) => {
  const json = value === undefined ? undefined : JSON.stringify(value);
  if (json === undefined) ctx.addIssue({ code: 'custom', message: 'must be a JSON value' });
  else if (new TextEncoder().encode(json).byteLength > PROGRESS_MAX_BYTES) {
    ctx.addIssue({
      code: 'custom',
      message: `must be at most ${PROGRESS_MAX_BYTES} bytes of JSON`,
    });
  }
});

export const Verb = {
  Join: 'join',
  Start: 'start',
  Result: 'result',
  Fail: 'fail',
  Release: 'release',
  Drain: 'drain',
  Leave: 'leave',
  Exited: 'exited',
  SubmitBegin: 'submit.begin',
  SubmitTasks: 'submit.tasks',
  SubmitCommit: 'submit.commit',
  Cancel: 'cancel',
  Enroll: 'enroll',
  Renew: 'renew',
  Revoke: 'revoke',
  PoisonedList: 'poisoned.list',
  PoisonedShow: 'poisoned.show',
  PoisonedRetry: 'poisoned.retry',
  PoisonedCancel: 'poisoned.cancel',
  Sweep: 'sweep',
  Progress: 'progress',
  Log: 'log',
  Batch: 'batch',
  ...ScheduleVerb,
} as const;
export type Verb = (typeof Verb)[keyof typeof Verb];

/**
 * The verbs a worker sends on its own subject, `<prefix>.api.w.<workerId>.<verb>`: the id in
 * the subject is who is asking, and must equal the request's `workerId`. All but `renew`
 * are also served on the shared `<prefix>.api.<verb>` for older workers, unless the
 * backend runs in secure mode.
 */
export const WORKER_VERBS: ReadonlySet<Verb> = new Set([
  Verb.Join,
  Verb.Start,
  Verb.Result,
  Verb.Fail,
  Verb.Release,
  Verb.Drain,
  Verb.Leave,
  Verb.Renew,
  Verb.Progress,
  Verb.Log,
  Verb.Batch,
]);

/** The verbs a `batch` request may carry: the two a busy worker sends for every task. */
export const BATCHABLE_VERBS = [Verb.Start, Verb.Result] as const;
export type BatchableVerb = (typeof BATCHABLE_VERBS)[number];
/** At most this many requests in one `batch`. */
export const MAX_BATCH = 64;

/** A NATS user public key (an nkey starting with `U`): a worker's own key pair. */
const userPublicKey = z
  .string()
  .regex(/^U[A-Z2-7]{55}$/, 'must be a NATS user public key (56 characters starting with U)');

const attemptFields = {
  runId: id,
  taskId: id,
  attemptId: id,
  token: z.string().min(1),
  workerId: id,
};

export const outputSchema = z.union([
  z.strictObject({ inline: z.base64(), bytes: z.number().int().min(0) }),
  z.strictObject({ ref: z.string().min(1).max(1024), bytes: z.number().int().min(0) }),
]);

export const taskInRunFile = z.strictObject({
  id,
  command: z.array(z.string()).min(1).optional(),
  input: taskInput.optional(),
  maxAttempts: z.number().int().min(1).max(100).optional(),
  tags: z.array(id).min(1).optional(),
  priority: priorityField.optional(),
  notBefore: notBeforeField.optional(),
  delay: delayField.optional(),
});

export const stepInRunFile = z.strictObject({
  id,
  tags: z.array(id).min(1, 'needs at least one tag'),
  maxConcurrent: z.number().int().min(1).optional(),
  after: z.array(id).default([]),
  output: z.enum(['json', 'bytes']).default('bytes'),
  timeoutMs: z.number().int().min(1).optional(),
  priority: priorityField.optional(),
  notBefore: notBeforeField.optional(),
  delay: delayField.optional(),
  retry: retryField.optional(),
  tasks: z.array(taskInRunFile),
});

/** A run file (`sonar submit RUN.json`, `SonarClient.submit()`); DESIGN.md section 8. */
export const runFileSchema = z.strictObject({
  runId: id,
  steps: z.array(stepInRunFile).min(1, 'needs at least one step'),
});
export type RunFile = z.input<typeof runFileSchema>;
export type ParsedRunFile = z.output<typeof runFileSchema>;
export type StepSpec = Omit<z.output<typeof stepInRunFile>, 'tasks'>;
export type TaskSpecInput = z.output<typeof taskInRunFile>;

export const requestSchemas = {
  [Verb.Join]: z.strictObject({
    workerId: id,
    host: z.string().min(1).max(255),
    instanceId: z.string().max(255).optional(),
    tags: z.array(id).min(1).max(MAX_WORKER_TAGS),
    // Also at most what a full pulse can list in one message (pulse-size.ts, checked by join).
    slots: z.number().int().min(1).max(MAX_SLOTS_CAP),
  }),
  [Verb.Start]: z.strictObject(attemptFields),
  [Verb.Result]: z.strictObject({ ...attemptFields, output: outputSchema }),
  [Verb.Fail]: z.strictObject({
    ...attemptFields,
    exitCode: z.number().int(),
    error: z.string().max(64 * 1024),
    retryable: z.boolean().default(true),
  }),
  [Verb.Release]: z.strictObject(attemptFields),
  [Verb.Drain]: z.strictObject({
    workerId: id,
    reason: z.enum(['spot-interruption', 'shutdown']),
    deadline: iso.optional(),
  }),
  [Verb.Leave]: z.strictObject({ workerId: id }),
  [Verb.Exited]: z.strictObject({
    workerId: id,
    code: z.number().int().nullable().optional(),
    signal: z.string().nullable().optional(),
  }),
  [Verb.SubmitBegin]: z.strictObject({
    runId: id,
    hash: fileHash,
    // Each step with its task count in place of its tasks: `StepCreated` needs the count, and
    // begin appends the steps (sonar's reading of DESIGN.md's "step without tasks").
    steps: z
      .array(stepInRunFile.omit({ tasks: true }).extend({ taskCount: z.number().int().min(0) }))
      .min(1),
    taskCount: z.number().int().min(0),
    // The JSON size of all the run's tasks: the backend refuses a run that would not fit in
    // the event log before writing anything (`store_full`). Optional: older clients omit it.
    bytes: z.number().int().min(0).optional(),
  }),
  [Verb.SubmitTasks]: z.strictObject({
    runId: id,
    stepId: id,
    tasks: z.array(taskInRunFile).max(1000),
  }),
  [Verb.SubmitCommit]: z.strictObject({ runId: id }),
  [Verb.Cancel]: z.strictObject({
    runId: id,
    taskId: id.optional(),
    reason: z.string().max(1024).default('cancelled by operator'),
  }),
  [Verb.Enroll]: z.strictObject({ workerId: id, publicKey: userPublicKey }),
  [Verb.Renew]: z.strictObject({ workerId: id, publicKey: userPublicKey }),
  [Verb.Revoke]: z.strictObject({
    workerId: id,
    reason: z.string().max(1024).default('revoked by operator'),
  }),
  [Verb.PoisonedList]: z.strictObject({ runId: id.optional() }),
  [Verb.PoisonedShow]: z.strictObject({ runId: id, taskId: id }),
  [Verb.PoisonedRetry]: z.strictObject({
    runId: id,
    taskId: id,
    by: z.string().min(1).max(256),
  }),
  [Verb.PoisonedCancel]: z.strictObject({
    runId: id,
    taskId: id,
    reason: z.string().max(1024).default('poisoned task cancelled by an operator'),
  }),
  [Verb.Sweep]: z.strictObject({}),
  // What a running attempt reports on the way: best effort, never part of the event log.
  [Verb.Progress]: z.strictObject({
    ...attemptFields,
    value: progressValue,
  }),
  [Verb.Log]: z
    .strictObject({
      ...attemptFields,
      // The attempt's chunks are numbered from 1, in the order written: a retried chunk is
      // stored once, and readers skip one they have seen.
      seq: z.number().int().min(1),
      // What the attempt wrote since the last chunk, in order, stream by stream.
      parts: z.array(logPart).min(1).max(LOG_PARTS_MAX),
      // Bytes the worker dropped before this chunk (it keeps the tail when a task writes faster
      // than it sends).
      dropped: z.number().int().min(0).default(0),
    })
    .superRefine((req, ctx) => {
      const bytes = req.parts.reduce((n, p) => n + Buffer.byteLength(p.text, 'utf8'), 0);
      if (bytes > LOG_CHUNK_BYTES) {
        ctx.addIssue({
          code: 'custom',
          path: ['parts'],
          message: `must hold at most ${LOG_CHUNK_BYTES} bytes of UTF-8 in all, not ${bytes}`,
        });
      }
    }),
  // Several start or result requests of one worker in one message, each answered as if
  // sent alone; each body is checked against its own verb's schema by the backend.
  [Verb.Batch]: z.strictObject({
    workerId: id,
    requests: z
      .array(z.strictObject({ verb: z.enum(BATCHABLE_VERBS), body: z.unknown() }))
      .min(1)
      .max(MAX_BATCH),
  }),
  ...scheduleRequestSchemas,
} as const;

export type RequestOf<V extends Verb> = z.input<(typeof requestSchemas)[V]>;
export type ParsedRequestOf<V extends Verb> = z.output<(typeof requestSchemas)[V]>;

/** Answer to `join`. */
export interface JoinReply {
  pulseIntervalMs: number;
  pulseTtlMs: number;
  stream: string;
  consumers: Record<string, string>;
}

/**
 * Answer to `enroll` and `renew`. `secure`: connect as this worker with `jwt` (signed for the
 * enrolled public key, named after the worker, valid until `expiresAt`) and the key pair's
 * seed. `open`: the backend mints no credentials; keep the connection you have.
 */
export interface CredentialReply {
  mode: 'secure' | 'open';
  jwt: string | null;
  expiresAt: string | null;
  /**
   * Secure mode with a workers' account: the JetStream API prefix the worker uses for every
   * JetStream request (`<prefix>.js.API`). Absent: `$JS.API`, the worker in the backend's
   * own account.
   */
  jsApiPrefix?: string;
  /**
   * Secure mode, when the workers' account lets workers pull only through the backend: the
   * subject stem `<prefix>.pull.<workerId>`; the worker asks `<stem>.<tag>` for each pull
   * ({@link pullRequestSchema}) instead of pulling the dispatch consumers itself. Absent:
   * pull the consumers directly.
   */
  pullSubject?: string;
}

/** Longest wait a pull through the backend may ask for. */
export const PULL_MAX_EXPIRES_MS = 60_000;
/** Shortest: a shorter pull costs a round trip for little (and nats.js pulls no shorter). */
export const PULL_MIN_EXPIRES_MS = 1_000;

/**
 * A pull through the backend, on `<prefix>.pull.<workerId>.<tag>`: up to `batch` dispatch
 * messages, waiting up to `expiresMs` for them. Answered with each message (its ack subject
 * in the header {@link PULL_ACK_HEADER}) and then one end message (header
 * {@link PULL_END_HEADER}, body a {@link Reply} of `{delivered}`).
 */
export const pullRequestSchema = z.strictObject({
  batch: z.number().int().min(1),
  expiresMs: z.number().int().min(PULL_MIN_EXPIRES_MS).max(PULL_MAX_EXPIRES_MS),
});
export type PullRequest = z.infer<typeof pullRequestSchema>;
/** On a message relayed by a pull through the backend: the subject its ack goes to. */
export const PULL_ACK_HEADER = 'Sonar-Ack';
/** On the last answer of a pull through the backend. */
export const PULL_END_HEADER = 'Sonar-Pull-End';

/** A dispatch message (DESIGN.md section 6, step 3): defined beside its publisher. */
export { dispatchMessageSchema } from '../streams/queues.js';
export type { DispatchMessage } from '../streams/queues.js';

/** A registry entry in `sonar_workers` (DESIGN.md section 4). */
export const registryEntrySchema = z.object({
  workerId: id,
  host: z.string(),
  instanceId: z.string().optional(),
  tags: z.array(id),
  slots: z.number().int().min(1),
  active: z.boolean(),
  pulseAt: z.string(),
  running: z.array(z.string()),
});
export type RegistryEntry = z.output<typeof registryEntrySchema>;

/** `sonar.control.cancel` (core NATS, not JetStream). */
export const cancelControlSchema = z.object({ runId: id, taskId: id.optional() });
export type CancelControl = z.infer<typeof cancelControlSchema>;

/** Every reply is one of these two shapes. */
export type Reply<T> =
  { ok: T } | { error: { code: string; message: string; details: Record<string, unknown> } };
