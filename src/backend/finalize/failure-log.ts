import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../../streams/names.js';
import { ErrorCode, SonarError } from '../../../actors/errors.js';

/** One failed finalization attempt, as kept in `sonar_finalize_errors` and `SONAR_POISON`. */
export interface FinalizeFailure {
  error: string;
  /** ISO-8601 time of the failure. */
  at: string;
  /** The server's delivery count of the job when it failed (1 = first delivery). */
  delivery: number;
  /** The operator retry round of the job (0 = the first job). */
  round: number;
  /** A permanent failure (missing or invalid output) poisons at once. */
  permanent: boolean;
  /** The backend that ran the job. */
  by: string;
}

/** Keeps one value per attempt whatever the bucket's history: a long error stays readable. */
const MAX_FAILURES_KEPT = 100;
const MAX_ERROR_CHARS = 2_000;
/** Compare-and-set rounds before giving up: two backends rarely fail the same job at once. */
const CAS_TRIES = 5;

export const failureKeyOf = (runId: string, taskId: string, attemptId: string): string =>
  `${runId}.${taskId}.${attemptId}`;

/**
 * The error history of each attempt's finalization, in `sonar_finalize_errors` under
 * `<runId>.<taskId>.<attemptId>`. The value is the whole history as a JSON array, appended with
 * compare-and-set: the bucket keeps few revisions, while operator retries can add many failures.
 */
export class FailureLog {
  constructor(readonly kv: KV) {}

  static async open(nc: NatsConnection, n: Names): Promise<FailureLog> {
    return new FailureLog(await new Kvm(nc).open(n.buckets.finalizeErrors));
  }

  /** Appends one failure; returns the attempt's whole history, this failure last. */
  async record(
    job: { runId: string; taskId: string; attemptId: string },
    failure: FinalizeFailure,
  ): Promise<FinalizeFailure[]> {
    const key = failureKeyOf(job.runId, job.taskId, job.attemptId);
    const entry: FinalizeFailure = { ...failure, error: failure.error.slice(0, MAX_ERROR_CHARS) };
    let lastErr: unknown;
    for (let i = 0; i < CAS_TRIES; i++) {
      const current = await this.kv.get(key);
      const before = current?.operation === 'PUT' ? current.json<FinalizeFailure[]>() : [];
      const after = [...before, entry].slice(-MAX_FAILURES_KEPT);
      try {
        if (current) await this.kv.update(key, JSON.stringify(after), current.revision);
        else await this.kv.create(key, JSON.stringify(after));
        return after;
      } catch (err: unknown) {
        // Another writer got there first (wrong last sequence): read again and re-append.
        lastErr = err;
      }
    }
    throw new SonarError(
      ErrorCode.Unavailable,
      `could not record the finalize error of ${key}`,
      { key },
      { cause: lastErr },
    );
  }

  /** The attempt's history, oldest first ([] when it never failed). */
  async history(runId: string, taskId: string, attemptId: string): Promise<FinalizeFailure[]> {
    const entry = await this.kv.get(failureKeyOf(runId, taskId, attemptId));
    return entry?.operation === 'PUT' ? entry.json<FinalizeFailure[]>() : [];
  }
}
