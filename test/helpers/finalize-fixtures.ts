/**
 * Fixtures for the finalizer tests and bench: put tasks into Finalizing without the worker
 * runtime (the task events appended directly), a tiny OutputStore over the real object store,
 * and sinks/stores instrumented to record concurrency.
 */
import { Objm } from '@nats-io/obj';
import type { ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import type { SonarEvent } from '../../actors/events.js';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { enqueueFinalization } from '../../streams/queues.js';
import type { FinalizeJob } from '../../streams/queues.js';
import { EventWriter } from '../../src/backend/projection/event-writer.js';
import type { Command } from '../../src/backend/projection/event-writer.js';
import { ProjectionLoop } from '../../src/backend/projection/projection-loop.js';
import type { SonarConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { outputKey } from '../../src/storage/output-store.js';
import type { OutputInfo, OutputStore } from '../../src/storage/output-store.js';
import { NatsOutputStore } from '../../src/storage/nats-output-store.js';
import type {
  OutputBody,
  ResultRecord,
  ResultsSink,
  UpsertOutcome,
} from '../../src/storage/results-sink.js';
import { jetstream } from '@nats-io/jetstream';

/** A writer of its own, as a second backend would have: loop, writer, store. */
export interface TestWriter {
  store: EventStore;
  loop: ProjectionLoop;
  writer: EventWriter;
  stop(): Promise<void>;
}

export async function openWriter(nc: NatsConnection, n: Names): Promise<TestWriter> {
  const store = new EventStore(nc, n);
  const loop = new ProjectionLoop(store, silentLogger);
  await loop.start();
  return { store, loop, writer: new EventWriter(store, loop), stop: () => loop.stop() };
}

/** A finalization lease short enough that a lost job comes back within a test. */
export const FINALIZE_TEST_ENV = { SONAR_FINALIZE_LEASE: '2s' } as const;

const TOKEN_HASH = 'a'.repeat(64);
const encoder = new TextEncoder();

/** The output of task `i`: JSON that names it. */
export const outputOf = (taskId: string): Uint8Array =>
  encoder.encode(JSON.stringify({ taskId, ok: true }));

export interface SeedOptions {
  runId: string;
  stepId?: string;
  taskIds: string[];
  output?: 'json' | 'bytes';
  /** Store the outputs of these tasks in the object store instead of inline. */
  stored?: (taskId: string) => boolean;
  /** The output bytes of a task. */
  outputFor?: (taskId: string) => Uint8Array;
  outputs?: OutputStore;
  /**
   * The ref a stored output's result reports, when not the attempt's own object (a worker
   * pointing at another object); nothing is uploaded for it then.
   */
  refFor?: (taskId: string) => string | undefined;
  /** The `bytes` a result declares, when not the output's real size. */
  declaredBytesFor?: (taskId: string) => number | undefined;
  /**
   * Attempts before the accepted one (default 1): attempt k is `a<k>`; each earlier attempt
   * is published, started and requeued (`operator`), so jobs for it are stale.
   */
  attemptsOf?: (taskId: string) => number;
}

async function all(writer: EventWriter, cmds: Command[]): Promise<void> {
  for (let i = 0; i < cmds.length; i += 2_000) {
    const results = await writer.writeMany(cmds.slice(i, i + 2_000));
    const bad = results.find((r) => r.status === 'rejected');
    if (bad) throw bad.reason;
  }
}

/**
 * Appends TaskCreated, StepCreated, RunSubmitted, then per attempt TaskPublished and
 * TaskStarted (and TaskRequeued for every attempt but the last), then TaskResultAccepted, so
 * each task is Finalizing; returns the jobs the `result` handler would enqueue (not enqueued:
 * see {@link enqueueAll}).
 */
export async function seedFinalizing(
  writer: EventWriter,
  n: Names,
  o: SeedOptions,
): Promise<FinalizeJob[]> {
  const stepId = o.stepId ?? 's1';
  const attemptsOf = o.attemptsOf ?? (() => 1);
  const task = (taskId: string, type: SonarEvent['type'], data: unknown): Command => ({
    subject: n.subjects.task(o.runId, taskId),
    type,
    data,
  });
  await all(
    writer,
    o.taskIds.map((taskId) =>
      task(taskId, 'TaskCreated', { runId: o.runId, stepId, taskId, tags: ['linux'] }),
    ),
  );
  await writer.write({
    subject: n.subjects.step(o.runId, stepId),
    type: 'StepCreated',
    data: {
      runId: o.runId,
      stepId,
      tags: ['linux'],
      after: [],
      taskCount: o.taskIds.length,
      output: o.output ?? 'json',
    },
  });
  await writer.write({
    subject: n.subjects.run(o.runId),
    type: 'RunSubmitted',
    data: { runId: o.runId, stepIds: [stepId], taskCount: o.taskIds.length },
  });
  // Each task's events in order; one layer of every task's k-th event is appended at a time.
  const histories = o.taskIds.map((taskId) => {
    const events: Command[] = [];
    const attempts = attemptsOf(taskId);
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const attemptId = `a${attempt}`;
      events.push(
        task(taskId, 'TaskPublished', { attempt, attemptId, tokenHash: TOKEN_HASH, tag: 'linux' }),
        task(taskId, 'TaskStarted', { attemptId, workerId: 'w1' }),
      );
      if (attempt < attempts) {
        events.push(task(taskId, 'TaskRequeued', { attemptId, reason: 'operator' }));
      }
    }
    return events;
  });
  for (let layer = 0; ; layer++) {
    const cmds = histories.flatMap((h) => h.slice(layer, layer + 1));
    if (cmds.length === 0) break;
    await all(writer, cmds);
  }
  const jobs: FinalizeJob[] = [];
  const accepted: Command[] = [];
  const uploads: (() => Promise<unknown>)[] = [];
  for (const taskId of o.taskIds) {
    const attemptId = `a${attemptsOf(taskId)}`;
    const bytes = (o.outputFor ?? outputOf)(taskId);
    let job: FinalizeJob;
    if (o.stored?.(taskId)) {
      if (!o.outputs) throw new Error('seedFinalizing: stored outputs need `outputs`');
      const foreign = o.refFor?.(taskId);
      const ref = foreign ?? outputKey(o.runId, taskId, attemptId);
      const store = o.outputs;
      if (foreign === undefined) uploads.push(() => store.put(ref, bytes));
      job = { runId: o.runId, taskId, attemptId, outputRef: ref };
    } else {
      const inline = Buffer.from(bytes).toString('base64');
      job = { runId: o.runId, taskId, attemptId, outputRef: 'inline', outputInline: inline };
    }
    jobs.push(job);
    accepted.push(
      task(taskId, 'TaskResultAccepted', {
        attemptId,
        workerId: 'w1',
        outputRef: job.outputRef,
        outputBytes: o.declaredBytesFor?.(taskId) ?? bytes.byteLength,
        ...(job.outputInline === undefined ? {} : { outputInline: job.outputInline }),
      }),
    );
  }
  // The worker uploads before it reports: outputs exist before their acceptance.
  for (let i = 0; i < uploads.length; i += 200) {
    await Promise.all(uploads.slice(i, i + 200).map((up) => up()));
  }
  await all(writer, accepted);
  return jobs;
}

/** Enqueues the jobs, pipelined, as many `result` handlers would. */
export async function enqueueAll(
  nc: NatsConnection,
  n: Names,
  jobs: FinalizeJob[],
  round = 0,
): Promise<void> {
  const js = jetstream(nc);
  for (let i = 0; i < jobs.length; i += 1_000) {
    await Promise.all(jobs.slice(i, i + 1_000).map((j) => enqueueFinalization(js, n, j, round)));
  }
}

/**
 * The smallest OutputStore over the `sonar_outputs` object store (@nats-io/obj); metadata and
 * chunked reads are the production store's.
 */
export class ObjOutputStore implements OutputStore {
  constructor(
    private readonly os: ObjectStore,
    private readonly chunked: NatsOutputStore,
  ) {}

  static async open(nc: NatsConnection, n: Names): Promise<ObjOutputStore> {
    const os = await new Objm(nc).open(n.objectStores.outputs);
    return new ObjOutputStore(os, await NatsOutputStore.open(nc, n));
  }

  stat(ref: string): Promise<OutputInfo | null> {
    return this.chunked.stat(ref);
  }

  read(ref: string, signal: AbortSignal): AsyncIterable<Uint8Array> {
    return this.chunked.read(ref, signal);
  }

  async put(key: string, data: Uint8Array): Promise<string> {
    await this.os.putBlob({ name: key }, data);
    return key;
  }

  get(ref: string): Promise<Uint8Array | null> {
    return this.os.getBlob(ref);
  }

  async delete(ref: string): Promise<void> {
    await this.os.delete(ref);
  }
}

/** A backend's output store part: an {@link ObjOutputStore} on the backend's prefix. */
export const objOutputs = (nc: NatsConnection, config: SonarConfig): Promise<OutputStore> =>
  ObjOutputStore.open(nc, names(config.prefix));

/** Counts operations in flight and remembers the most seen at once. */
export class Gauge {
  now = 0;
  max = 0;

  async track<T>(fn: () => Promise<T>, also: Gauge[] = []): Promise<T> {
    const gauges = [this, ...also];
    for (const g of gauges) {
      g.now++;
      if (g.now > g.max) g.max = g.now;
    }
    try {
      return await fn();
    } finally {
      for (const g of gauges) g.now--;
    }
  }
}

/** One sink call, for assertions on attempts and timing. */
export interface SinkCall {
  key: string;
  attemptId: string;
  at: number;
}

/**
 * A sink that wraps another, records every call and its concurrency, and can be told to fail
 * (`failWhen`) or to be slow (`delayMs`, or `hold` until released).
 */
export class InstrumentedSink implements ResultsSink {
  readonly calls: SinkCall[] = [];
  readonly writes = new Gauge();
  failWhen: ((record: ResultRecord, callsForKey: number) => boolean) | null = null;
  delayMs = 0;
  hold: Promise<void> | null = null;

  constructor(
    private readonly inner: ResultsSink | null,
    private readonly shared: Gauge[] = [],
  ) {}

  upsert(record: ResultRecord, output: OutputBody, signal: AbortSignal): Promise<UpsertOutcome> {
    const key = `${record.runId}.${record.taskId}`;
    const callsForKey = this.calls.filter((c) => c.key === key).length + 1;
    this.calls.push({ key, attemptId: record.attemptId, at: performance.now() });
    return this.writes.track(async () => {
      if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
      if (this.hold) await this.hold;
      if (this.failWhen?.(record, callsForKey)) throw new Error(`sink refused ${key}`);
      return this.inner ? this.inner.upsert(record, output, signal) : 'written';
    }, this.shared);
  }

  callsFor(key: string): SinkCall[] {
    return this.calls.filter((c) => c.key === key);
  }
}

/** An output store that records concurrent reads, and every byte read. */
export class InstrumentedOutputs implements OutputStore {
  readonly reads = new Gauge();
  /** Bytes handed out by `get` and `read`, per ref. */
  readonly bytesRead = new Map<string, number>();
  constructor(
    private readonly inner: OutputStore,
    private readonly shared: Gauge[] = [],
  ) {}

  private count(ref: string, bytes: number): void {
    this.bytesRead.set(ref, (this.bytesRead.get(ref) ?? 0) + bytes);
  }

  put(key: string, data: Uint8Array): Promise<string> {
    return this.inner.put(key, data);
  }
  get(ref: string): Promise<Uint8Array | null> {
    return this.reads.track(async () => {
      const data = await this.inner.get(ref);
      this.count(ref, data?.byteLength ?? 0);
      return data;
    }, this.shared);
  }
  stat(ref: string): Promise<OutputInfo | null> {
    return this.inner.stat(ref);
  }
  async *read(ref: string, signal: AbortSignal): AsyncIterable<Uint8Array> {
    const gauges = [this.reads, ...this.shared];
    for (const g of gauges) g.max = Math.max(g.max, ++g.now);
    try {
      for await (const chunk of this.inner.read(ref, signal)) {
        this.count(ref, chunk.byteLength);
        yield chunk;
      }
    } finally {
      for (const g of gauges) g.now--;
    }
  }
  delete(ref: string): Promise<void> {
    return this.inner.delete(ref);
  }
}

/** Task state by key, from a projection. */
export const stateOf = (loop: ProjectionLoop, runId: string, taskId: string): string | undefined =>
  loop.projection.tasks.get(`${runId}.${taskId}`)?.snapshot.value;

/** How many tasks of a run are in `state`. */
export function countIn(loop: ProjectionLoop, runId: string, state: string): number {
  let count = 0;
  for (const [key, t] of loop.projection.tasks) {
    if (t.snapshot.value === state && key.startsWith(`${runId}.`)) count++;
  }
  return count;
}

export const taskIds = (count: number, prefix = 't'): string[] =>
  Array.from({ length: count }, (_, i) => `${prefix}${i}`);
