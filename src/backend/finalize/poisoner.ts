import type { JetStreamClient } from '@nats-io/jetstream';
import { IllegalTransitionError } from '../../../actors/errors.js';
import { plainJob } from '../../../streams/queues.js';
import type { FinalizeJob } from '../../../streams/queues.js';
import type { Logger } from '../../log.js';
import type { FailureLog, FinalizeFailure } from './failure-log.js';
import { currentFinalizing } from './finalize-job.js';
import type { JobDeps, QueuedJob } from './finalize-job.js';

/** A message of `SONAR_POISON` (`<prefix>.poison.<runId>.<taskId>`): kept for inspection. */
export interface PoisonRecord {
  job: FinalizeJob;
  attemptId: string;
  /** The operator retry round the poisoned job belonged to. */
  round: number;
  /** The last error, as in `TaskPoisoned`. */
  error: string;
  /** Deliveries the job had when it was poisoned. */
  deliveries: number;
  /** The attempt's whole error history (every round), oldest first. */
  errors: FinalizeFailure[];
  poisonedAt: string;
  by: string;
}

export interface PoisonerDeps extends Pick<JobDeps, 'names' | 'store' | 'loop' | 'writer' | 'now'> {
  js: JetStreamClient;
  failures: FailureLog;
  log: Logger;
  nodeId: string;
}

const encoder = new TextEncoder();

/**
 * Poisons a finalization job (DESIGN.md section 7): its record and error history go to
 * `SONAR_POISON`, then `TaskPoisoned` is appended, only while the task is Finalizing with the
 * job's attempt. The caller removes the job from the work queue afterwards, so a crash in
 * between leaves the job to be redelivered (then dropped as stale) rather than lost.
 */
export class Poisoner {
  constructor(private readonly deps: PoisonerDeps) {}

  async poison(
    job: QueuedJob,
    why: { error: string; deliveries: number },
  ): Promise<'poisoned' | 'stale'> {
    const { deps } = this;
    const current = await currentFinalizing(deps, job);
    if (!current) return 'stale';
    const round = current.task.finalizeRound;
    const record: PoisonRecord = {
      job: plainJob(job),
      attemptId: job.attemptId,
      round,
      error: why.error,
      deliveries: why.deliveries,
      errors: await deps.failures.history(job.runId, job.taskId, job.attemptId),
      poisonedAt: new Date(deps.now()).toISOString(),
      by: deps.nodeId,
    };
    const tag = `${job.runId}.${job.taskId}.${job.attemptId}.${round}`;
    await deps.js.publish(
      deps.names.subjects.poison(job.runId, job.taskId),
      encoder.encode(JSON.stringify(record)),
      { msgID: `poison.${tag}` },
    );
    try {
      await deps.writer.write({
        subject: deps.names.subjects.task(job.runId, job.taskId),
        type: 'TaskPoisoned',
        data: { attemptId: job.attemptId, error: why.error, deliveries: why.deliveries },
        id: `poisoned.${tag}`,
      });
    } catch (err: unknown) {
      // Cancelled or finalized meanwhile: the poison record stays, for inspection only.
      if (err instanceof IllegalTransitionError) return 'stale';
      throw err;
    }
    deps.log.warn('task poisoned', {
      runId: job.runId,
      taskId: job.taskId,
      attemptId: job.attemptId,
      deliveries: why.deliveries,
      error: why.error,
    });
    return 'poisoned';
  }

  /** A payload that is not a job at all: keep the raw bytes beside the task's poison records. */
  async poisonUnreadable(subject: string, data: Uint8Array): Promise<void> {
    const { names, js, nodeId, now } = this.deps;
    // `<prefix>.finalize.>` without the `>`: what is left of the subject is `<runId>.<taskId>`.
    const head = names.subjects.finalizeAll.slice(0, -1);
    const [runId, taskId] = subject.slice(head.length).split('.');
    if (runId === undefined || taskId === undefined) return;
    const record = {
      job: null,
      raw: Buffer.from(data).toString('base64'),
      error: 'finalize job is not valid JSON of the job shape',
      poisonedAt: new Date(now()).toISOString(),
      by: nodeId,
    };
    await js.publish(names.subjects.poison(runId, taskId), encoder.encode(JSON.stringify(record)));
  }
}
