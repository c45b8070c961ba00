import type { JetStreamClient } from '@nats-io/jetstream';
import { newId } from '../../ids.js';
import type { Names } from '../../../streams/names.js';
import {
  enqueueFinalization,
  enqueueFinalizationBatch,
  plainJob,
} from '../../../streams/queues.js';
import type { BatchedJob, FinalizeJob } from '../../../streams/queues.js';

interface Waiting {
  job: BatchedJob;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Enqueues the finalization jobs of accepted results, one message for all the inline-output
 * jobs enqueued in the same event-loop turn (the results of one `batch` request, and of
 * requests handled beside it). Each caller's promise settles with its message's publish, so a
 * result is answered only once its job is stored, as before. A turn with one job, a stored
 * output or a limit of 1 sends the single form, which every backend version reads.
 */
export class JobBatcher {
  private waiting: Waiting[] = [];
  private bytes = 0;

  /**
   * @param maxJobs - the most jobs in one message (`SONAR_FINALIZE_BATCH`); 1 sends only single jobs.
   * @param maxBytes - the most bytes of one message, well inside the server's max_payload.
   */
  constructor(
    private readonly js: JetStreamClient,
    private readonly names: Names,
    private readonly maxJobs: number,
    private readonly maxBytes: number,
  ) {}

  /** Stored once the promise resolves; `round` is the operator retry round (0 at first). */
  enqueue(job: FinalizeJob, round: number, traceparent?: string): Promise<void> {
    // Only first-round inline jobs travel together: a stored output is read from the output
    // store, which the pool bounds one job per lane, and a retry round keeps its own msg id.
    if (this.maxJobs <= 1 || job.outputInline === undefined || round !== 0) {
      return this.single(job, round, traceparent);
    }
    const entry: BatchedJob = {
      ...job,
      round: 0,
      ...(traceparent !== undefined && { traceparent }),
    };
    const size = sizeOf(entry);
    if (this.waiting.length > 0 && this.bytes + size > this.maxBytes) this.flush();
    return new Promise<void>((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => this.flush());
      this.waiting.push({ job: entry, resolve, reject });
      this.bytes += size;
      if (this.waiting.length >= this.maxJobs) this.flush();
    });
  }

  private flush(): void {
    const batch = this.waiting;
    this.waiting = [];
    this.bytes = 0;
    if (batch.length === 0) return;
    const sent =
      batch.length === 1
        ? this.single(batch[0]!.job, 0, batch[0]!.job.traceparent)
        : this.publish(batch.map((w) => w.job));
    sent.then(
      () => batch.forEach((w) => w.resolve()),
      (err: unknown) => batch.forEach((w) => w.reject(err)),
    );
  }

  /**
   * Every result of the batch waits on this publish: one whose ack was lost (a timeout) is sent
   * again under the same msg id, stored once, before the results are failed.
   */
  private async publish(jobs: BatchedJob[]): Promise<void> {
    const id = newId();
    for (let attempt = 1; ; attempt++) {
      try {
        await enqueueFinalizationBatch(this.js, this.names, { jobs }, id);
        return;
      } catch (err: unknown) {
        if (attempt >= PUBLISH_ATTEMPTS) throw err;
      }
    }
  }

  /** The job alone, under its own msg id (`fin.<runId>.<taskId>.<attemptId>.<round>`). */
  async single(job: FinalizeJob, round: number, traceparent?: string): Promise<void> {
    await enqueueFinalization(this.js, this.names, plainJob(job), round, undefined, traceparent);
  }
}

const PUBLISH_ATTEMPTS = 3;

/** About the JSON bytes of an entry: base64 dominates, the rest is ids. */
const sizeOf = (job: BatchedJob): number =>
  (job.outputInline?.length ?? 0) + job.outputRef.length + 3 * 64 + 120;
