/** One fired run to submit. */
export interface SubmitJob {
  schedule: string;
  runId: string;
}

export interface SubmitQueueOptions {
  /** Submits going at once. */
  concurrency: number;
  /** Jobs waiting at most; an offer beyond is refused (the sweep offers it again later). */
  capacity: number;
}

/**
 * The firer's submits, off its firing pass: a bounded queue worked by a few lanes, so a slow
 * or failing submit of one schedule never holds the firing of the others. A run id is queued
 * or going at most once. Losing a queued job is safe (a stop, a full queue): the run stays
 * owed in the log and the next sweep offers it again.
 */
export class SubmitQueue {
  private readonly waiting = new Map<string, SubmitJob>();
  private readonly going = new Set<string>();
  private readonly lanes = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly work: (job: SubmitJob) => Promise<void>,
    private readonly opts: SubmitQueueOptions,
  ) {}

  /** Jobs waiting or going. */
  get size(): number {
    return this.waiting.size + this.going.size;
  }

  /** No room for another job. */
  get full(): boolean {
    return this.waiting.size >= this.opts.capacity;
  }

  /** Queues a job; false when it is already queued or going, the queue is full, or stopped. */
  offer(job: SubmitJob): boolean {
    if (this.stopped || this.waiting.has(job.runId) || this.going.has(job.runId)) return false;
    if (this.waiting.size >= this.opts.capacity) return false;
    this.waiting.set(job.runId, job);
    if (this.lanes.size < this.opts.concurrency) this.startLane();
    return true;
  }

  private startLane(): void {
    const lane = this.runLane().finally(() => this.lanes.delete(lane));
    this.lanes.add(lane);
  }

  private async runLane(): Promise<void> {
    while (!this.stopped) {
      const next = this.waiting.values().next();
      if (next.done === true) return;
      const job = next.value;
      this.waiting.delete(job.runId);
      this.going.add(job.runId);
      try {
        await this.work(job);
      } catch (_err: unknown) {
        // work() logs its own failures; a lane never dies of one.
      } finally {
        this.going.delete(job.runId);
      }
    }
  }

  /** Drops what waits and resolves once the submits going have ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.waiting.clear();
    await Promise.all([...this.lanes]);
  }

  /** Takes offers again after a stop. */
  restart(): void {
    this.stopped = false;
  }
}
