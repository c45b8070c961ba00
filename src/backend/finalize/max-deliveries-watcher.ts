import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import { isNoMessage } from '../../../streams/errors.js';
import type { ConsumerConfig, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { Names } from '../../../streams/names.js';
import { ensureConsumer } from '../../../streams/provision.js';
import type { Logger } from '../../log.js';
import type { FailureLog } from './failure-log.js';
import { parseJobs } from './finalize-job.js';
import type { Poisoner } from './poisoner.js';
import { SerialPuller } from './serial-puller.js';

/** The durable consumer on `<PREFIX>_ADVISORIES` that the finalizer pools share. */
export const ADVISORIES_CONSUMER = 'finalizer_advisories';
/** A failed advisory (server busy) is tried again after this. */
const RETRY_MS = 5_000;

/**
 * Pull, explicit ack, deliver all: every backend binds to it and each advisory is handled once.
 * No max_deliver: an advisory that cannot be handled yet is retried until it can.
 */
export function advisoriesConsumer(): Partial<ConsumerConfig> {
  return {
    durable_name: ADVISORIES_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(30_000),
    max_ack_pending: 1_000,
  };
}

/** `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>` (the fields used). */
interface MaxDeliveriesAdvisory {
  stream?: string;
  consumer?: string;
  stream_seq?: number;
  deliveries?: number;
}

/**
 * Poisons jobs that ran out of deliveries without a finalizer deciding so: the last delivery's
 * lease ran out (its backend died), or its poison step failed. Such a job stays in the work
 * queue and holds the ack floor; the server announces it once, fire-and-forget, and the
 * `<PREFIX>_ADVISORIES` stream keeps the announcement for whichever backend is up next.
 */
export class MaxDeliveriesWatcher {
  private puller: SerialPuller | null = null;

  constructor(
    readonly deps: {
      jsm: JetStreamManager;
      names: Names;
      failures: FailureLog;
      poisoner: Poisoner;
      log: Logger;
    },
  ) {}

  async start(): Promise<void> {
    const { jsm, names, log } = this.deps;
    await ensureConsumer(jsm, names.streams.advisories, advisoriesConsumer());
    const consumer = await jsm
      .jetstream()
      .consumers.get(names.streams.advisories, ADVISORIES_CONSUMER);
    this.puller = new SerialPuller(consumer, (m) => this.handle(m), log);
    this.puller.start();
  }

  async stop(): Promise<void> {
    await this.puller?.stop();
  }

  private async handle(msg: JsMsg): Promise<void> {
    try {
      await this.handleAdvisory(msg.json<MaxDeliveriesAdvisory>());
      msg.ack();
    } catch (err: unknown) {
      this.deps.log.warn('max deliveries advisory failed', { err });
      msg.nak(RETRY_MS);
    }
  }

  private async handleAdvisory(a: MaxDeliveriesAdvisory): Promise<void> {
    const { names, log } = this.deps;
    if (a.stream !== names.streams.finalize || a.consumer !== names.consumers.finalizer) return;
    if (typeof a.stream_seq !== 'number') return;
    const held = await poisonHeldJob(this.deps, a.stream_seq, a.deliveries);
    if (held.outcome !== 'gone') log.info('max deliveries handled', { seq: a.stream_seq, ...held });
  }
}

/** What became of a job (or a batch) held in the finalize work queue past max_deliver. */
export interface HeldJob {
  /**
   * `gone`: acked late or already moved; `unreadable`: not a job, its bytes were kept;
   * `poisoned`: at least one of its jobs was (the others were stale).
   */
  outcome: 'poisoned' | 'stale' | 'unreadable' | 'gone';
  /** The tasks (`<runId>.<taskId>`) of its jobs. */
  tasks?: string[];
}

/**
 * Moves the job at `streamSeq` of the finalize stream, which ran out of deliveries, to
 * `SONAR_POISON` (TaskPoisoned while its attempt is current; stale jobs are only dropped),
 * then deletes it from the work queue, which releases the ack floor. Idempotent: the poison
 * record and TaskPoisoned are deduplicated, and a job already gone is `gone`. Used by the
 * advisory watcher and by the full sweep.
 */
export async function poisonHeldJob(
  deps: Pick<MaxDeliveriesWatcher['deps'], 'jsm' | 'names' | 'failures' | 'poisoner'>,
  streamSeq: number,
  deliveries?: number,
): Promise<HeldJob> {
  const { jsm, names, failures, poisoner } = deps;
  const stream = names.streams.finalize;
  let stored;
  try {
    stored = await jsm.streams.getMessage(stream, { seq: streamSeq });
  } catch (err: unknown) {
    if (isNoMessage(err)) return { outcome: 'gone' }; // acked late, or already moved
    throw err;
  }
  if (!stored) return { outcome: 'gone' };
  const queued = parseJobs(stored.data);
  let held: HeldJob;
  if (queued) {
    held = { outcome: 'stale', tasks: [] };
    // A batch's jobs that finished (or were split off) are stale here.
    for (const job of queued.jobs) {
      const history = await failures.history(job.runId, job.taskId, job.attemptId);
      const last = history.at(-1)?.error ?? 'finalize lease expired on its last delivery';
      const outcome = await poisoner.poison(job, {
        error: last,
        deliveries: deliveries ?? history.length,
      });
      if (outcome === 'poisoned') held.outcome = 'poisoned';
      held.tasks!.push(`${job.runId}.${job.taskId}`);
    }
  } else {
    await poisoner.poisonUnreadable(stored.subject, stored.data);
    held = { outcome: 'unreadable' };
  }
  // Poisoned (or stale): the job leaves the work queue and releases the ack floor.
  try {
    await jsm.streams.deleteMessage(stream, streamSeq, false);
  } catch (err: unknown) {
    if (!isNoMessage(err)) throw err;
  }
  return held;
}
