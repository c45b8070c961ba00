import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { isWrongLastSequence } from '../../streams/errors.js';
import type { Names } from '../../streams/names.js';
import { INLINE_OUTPUT_MAX } from './output-store.js';
import { jetstreamOf } from '../../streams/jetstream-api.js';

/**
 * One finalized result: the record a sink keeps per task (DESIGN.md section 7), keyed
 * `<runId>.<taskId>` and stamped with the attempt that produced it.
 */
export interface ResultRecord {
  runId: string;
  stepId: string;
  taskId: string;
  attemptId: string;
  /** The attempt's number (1, 2, ...: publishes of the task so far). */
  attempt: number;
  /** ISO-8601 server time the attempt started (`TaskStarted`); null when unknown. */
  startedAt: string | null;
  /** ISO-8601 server time its result was accepted (`TaskResultAccepted`); null when unknown. */
  finishedAt: string | null;
  /** Where the output lives: an output store key, or `inline`. */
  outputRef: string;
  /** Decoded size of the output. */
  bytes: number;
  /** The step's declared output kind. */
  kind: 'json' | 'bytes';
  /** ISO-8601 time the finalizer upserted the record. */
  finalizedAt: string;
}

/** What an upsert did. `unchanged`: the sink already held this attempt (a duplicate job). */
export type UpsertOutcome = 'written' | 'unchanged';

/**
 * A validated output as a sink receives it. A large output is never held whole in memory:
 * a sink that needs its bytes streams them with `chunks`.
 */
export interface OutputBody {
  /** Size in bytes. */
  readonly bytes: number;
  /** The whole output when at most {@link INLINE_OUTPUT_MAX} bytes, else null. */
  readonly small: Uint8Array | null;
  /**
   * The output in chunks, read from the output store (for a large one) a few at a time.
   * Pass the sink's `signal`: the read stops when the write's deadline passes.
   */
  chunks(signal: AbortSignal): AsyncIterable<Uint8Array>;
}

/**
 * Where finalized results go. The finalizer pool takes one in its options, so a user can send
 * results to their own database. Implementations must be idempotent per attempt: the same
 * `(key, attemptId)` upserted twice leaves one record, since a job can run more than once
 * (a redelivery after a lost ack, a re-enqueue after the dedupe window).
 */
export interface ResultsSink {
  /**
   * Upserts the record under `<runId>.<taskId>`; `output` is the validated output. `signal`
   * aborts when the write's deadline (the finalize lease) passes: the job is then retried
   * whether or not the write stops, so a write should honour it.
   * @throws SinkUnavailableError while the sink cannot be reached (the pool pauses);
   * SinkRejectedError when the sink refuses this record for good (the job is poisoned).
   */
  upsert(record: ResultRecord, output: OutputBody, signal: AbortSignal): Promise<UpsertOutcome>;
  /**
   * Resolves once the sink answers again; the finalizer pool calls it while paused after a
   * {@link SinkUnavailableError}. Without it, the pool retries the held jobs on a timer.
   */
  probe?(): Promise<void>;
  /** Deletes every record of a run (SONAR_RETENTION). Idempotent. */
  purgeRun?(runId: string): Promise<void>;
  /** Releases connections; the backend calls it last, when it stops. */
  close?(): Promise<void>;
}

/** What `sonar results` and the client SDK read, from whichever sink is configured. */
export interface ResultsReader {
  /** The stored result of a task, or null. */
  get(runId: string, taskId: string): Promise<StoredResult | null>;
  /** Every stored result of a run, by task id. */
  list(runId: string): Promise<StoredResult[]>;
  close?(): Promise<void>;
}

/**
 * The sink cannot be reached (its database is down, its connection refused): nothing is
 * wrong with the record. The finalizer pool pauses instead of spending the job's deliveries.
 */
export class SinkUnavailableError extends SonarError {
  override readonly name = 'SinkUnavailableError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Unavailable, message, {}, options);
  }
}

export const isSinkUnavailable = (e: unknown): e is SinkUnavailableError =>
  e instanceof SinkUnavailableError;

/**
 * The sink refuses this record, and would refuse it again (a constraint or data error): the
 * message is the sink's own, so the poisoned task's error history says why.
 */
export class SinkRejectedError extends SonarError {
  override readonly name = 'SinkRejectedError';
  constructor(message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(ErrorCode.Validation, message, details, options);
  }
}

export const isSinkRejected = (e: unknown): e is SinkRejectedError =>
  e instanceof SinkRejectedError;

/** An output already in memory (an inline one, or a test's) as a sink receives it. */
export function bodyOf(bytes: Uint8Array): OutputBody {
  return {
    bytes: bytes.byteLength,
    small: bytes.byteLength <= INLINE_OUTPUT_MAX ? bytes : null,
    // Bytes already in hand: nothing to await, but the contract is an async iterable.
    // eslint-disable-next-line @typescript-eslint/require-await
    chunks: async function* () {
      yield bytes;
    },
  };
}

/** The sink key of a task: `<runId>.<taskId>`. */
export const resultKeyOf = (runId: string, taskId: string): string => `${runId}.${taskId}`;

/** A `sonar_results` value: the record, plus the output itself when it is small. */
export interface StoredResult extends ResultRecord {
  /** Parsed output of a `json` step, when at most {@link INLINE_OUTPUT_MAX} bytes. */
  json?: unknown;
  /** Base64 output of a `bytes` step, when at most {@link INLINE_OUTPUT_MAX} bytes. */
  inline?: string;
}

const decoder = new TextDecoder();

/**
 * The default sink: the `sonar_results` KV bucket (history 1), one key per task. Small outputs
 * are copied into the value (a KV value is bounded by the server's max payload); larger ones
 * stay in the output store and the record points at them by `outputRef`.
 */
export class KvResultsSink implements ResultsSink, ResultsReader {
  constructor(readonly kv: KV) {}

  static async open(nc: NatsConnection, n: Names): Promise<KvResultsSink> {
    return new KvResultsSink(await new Kvm(await jetstreamOf(nc, n)).open(n.buckets.results));
  }

  async upsert(record: ResultRecord, output: OutputBody): Promise<UpsertOutcome> {
    const key = resultKeyOf(record.runId, record.taskId);
    const value: StoredResult = { ...record };
    const small = output.small;
    if (small) {
      if (record.kind === 'json') value.json = JSON.parse(decoder.decode(small)) as unknown;
      else value.inline = Buffer.from(small).toString('base64');
    }
    const json = JSON.stringify(value);
    // The first job of a task finds no record: one create writes it, where reading first
    // would cost a round trip on every task. Only a duplicate job (or a record left by
    // another attempt) finds one, and reads it then.
    try {
      await this.kv.create(key, json);
      return 'written';
    } catch (err: unknown) {
      if (!isWrongLastSequence(err)) throw err;
    }
    // Same attempt already there: a duplicate job. Keep the first record (and its time).
    const existing = await this.get(record.runId, record.taskId);
    if (existing?.attemptId === record.attemptId) return 'unchanged';
    await this.kv.put(key, json);
    return 'written';
  }

  /** The stored result of a task, or null. */
  async get(runId: string, taskId: string): Promise<StoredResult | null> {
    const entry = await this.kv.get(resultKeyOf(runId, taskId));
    if (!entry || entry.operation !== 'PUT') return null;
    return entry.json<StoredResult>();
  }

  /** Every stored result of a run, by task id. */
  async list(runId: string): Promise<StoredResult[]> {
    const keys: string[] = [];
    for await (const key of await this.kv.keys(`${runId}.*`)) keys.push(key);
    const found = await Promise.all(
      keys.map((key) => this.get(runId, key.slice(runId.length + 1))),
    );
    return found
      .filter((r): r is StoredResult => r !== null)
      .sort((a, b) => (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
  }
}
