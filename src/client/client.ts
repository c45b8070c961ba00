import { jetstreamManagerOf } from '../../streams/jetstream-api.js';
import { SpanKind } from '@opentelemetry/api';
import { inSpan } from '../tracing/tracer.js';
import { traceparentOf } from '../tracing/traceparent.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { assertId } from '../../actors/ids.js';
import { EventStore } from '../../streams/event-store.js';
import { explainMissingStreams } from '../../streams/missing-topology.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { loadConfig } from '../config.js';
import type { Logger } from '../log.js';
import { connectNats } from '../nats.js';
import type { ConnectSettings } from '../nats.js';
import type { ParsedRunFile, RunFile } from '../protocol.js';
import { createOutputStore } from '../storage/create-output-store.js';
import type { OutputStoreSettings } from '../storage/create-output-store.js';
import type { OutputStore } from '../storage/output-store.js';
import { readOutput } from '../storage/result-reader.js';
import { createResultsSink } from '../storage/create-results-sink.js';
import type { ConfiguredSink } from '../storage/create-results-sink.js';
import type { StoredResult } from '../storage/results-sink.js';
import type { LogChunk } from '../storage/task-logs.js';
import { ProgressStore } from '../storage/task-progress.js';
import type { TaskProgress } from '../storage/task-progress.js';
import { ApiClient } from '../worker/api-client.js';
import { submitParsedRunFile } from '../run-submit.js';
import { validateRunFile } from '../run-file.js';
import type { Submitted } from '../run-submit.js';
import { isRunEnded } from './run-status.js';
import type { RunStatus } from './run-status.js';
export { chunkTasks } from '../run-submit.js';
export type { Submitted } from '../run-submit.js';
export type { RunStatus } from './run-status.js';
export type { RunUpdate } from './run-watch.js';
import { watchRun } from './run-watch.js';
import type { RunUpdate } from './run-watch.js';
import { taskLog } from './task-log.js';
import type { TaskLogOptions } from './task-log.js';
export type { TaskLogOptions } from './task-log.js';
export type { LogChunk } from '../storage/task-logs.js';
export type { TaskProgress } from '../storage/task-progress.js';

/** Options of {@link SonarClient}. */
export interface SonarClientOptions {
  /**
   * The topology prefix (`SONAR_PREFIX`).
   * @defaultValue `sonar`
   */
  prefix?: string;
  /**
   * `SONAR_MAX_INPUT`: task inputs larger than this are refused before anything is sent.
   * @defaultValue 256 KiB
   */
  maxInputBytes?: number;
  /**
   * `submit.tasks` chunks in flight at once.
   * @defaultValue 4
   */
  chunkConcurrency?: number;
  /**
   * One request's timeout.
   * @defaultValue 5000 (a 1,000-task chunk is written in well under that)
   */
  requestTimeoutMs?: number;
  /**
   * Where large outputs are read from (`output`): the S3 bucket of `SONAR_S3_*`, else the
   * `<prefix>_outputs` object store.
   * @defaultValue the object store under `prefix`
   */
  outputs?: Pick<OutputStoreSettings, 's3'>;
  /**
   * `SONAR_RESULTS_URL`: read results (`results`, `output`) from that PostgreSQL table, as the
   * backends write them there.
   * @defaultValue unset: the `<prefix>_results` KV bucket
   */
  resultsUrl?: string;
  log?: Logger;
}

/**
 * The client SDK (DESIGN.md sections 6 and 8): submits run files in chunks, cancels runs and
 * tasks, and reads a run's status from its events. `sonar submit` and `sonar cancel` use it.
 */
export class SonarClient {
  private readonly api: ApiClient;
  private readonly n: Names;
  private readonly store: EventStore;
  private outputStore: Promise<OutputStore> | null = null;
  private progressBucket: Promise<ProgressStore | null> | null = null;
  private resultsSink: Promise<ConfiguredSink> | null = null;

  constructor(
    readonly nc: NatsConnection,
    private readonly opts: SonarClientOptions = {},
    private readonly ownsConnection = false,
  ) {
    this.n = names(opts.prefix ?? 'sonar');
    this.api = new ApiClient(nc, this.n, {
      timeoutMs: opts.requestTimeoutMs ?? 5_000,
      ...(opts.log && { log: opts.log }),
    });
    this.store = new EventStore(nc, this.n);
  }

  /** Connects with `settings` (closed again by {@link SonarClient.close}). */
  static async connect(
    settings: ConnectSettings,
    opts: SonarClientOptions = {},
  ): Promise<SonarClient> {
    return new SonarClient(await connectNats(settings, { name: 'sonar-client' }), opts, true);
  }

  /**
   * Connects as the CLI does, from the same `SONAR_*` variables (`env`, default the process's): `SONAR_NATS_URL` and its
   * credentials, `SONAR_PREFIX`, `SONAR_MAX_INPUT` and `SONAR_S3_*`. `opts` wins over them.
   *
   * @throws ConfigError naming each variable that does not parse.
   */
  static async fromEnv(
    env?: Readonly<Record<string, string | undefined>>,
    opts: SonarClientOptions = {},
  ): Promise<SonarClient> {
    const config = loadConfig(env);
    return SonarClient.connect(config, {
      prefix: config.prefix,
      maxInputBytes: config.maxInputBytes,
      outputs: { s3: config.s3 },
      ...(config.resultsUrl !== undefined && { resultsUrl: config.resultsUrl }),
      ...opts,
    });
  }

  /**
   * Submits a run file: validated whole first (every problem listed, nothing sent), then
   * `submit.begin`, the tasks in chunks (a few in flight), and `submit.commit`. Submitting
   * the same file again completes a submit that was cut short.
   *
   * @throws ValidationError for a bad file; ApiError `conflict` when another file was already
   *   submitted under its runId.
   */
  async submit(runFile: RunFile): Promise<Submitted> {
    const file: ParsedRunFile = validateRunFile(runFile, {
      maxInputBytes: this.opts.maxInputBytes ?? 256 * 1024,
    });
    // The run's trace begins here (or under the caller's active span): every request of the
    // submit carries this span's traceparent, and the backend records it with the run.
    return inSpan(
      'submit',
      { kind: SpanKind.CLIENT, attributes: { 'sonar.run_id': file.runId } },
      async (span, ctx) => {
        span.setAttribute(
          'sonar.task_count',
          file.steps.reduce((n, s) => n + s.tasks.length, 0),
        );
        return submitParsedRunFile(this.api, file, {
          chunkConcurrency: this.opts.chunkConcurrency ?? 4,
          traceparent: traceparentOf(ctx),
        });
      },
    );
  }

  /** Cancels a run, or one task of it. */
  cancel(
    runId: string,
    opts: { taskId?: string; reason?: string } = {},
  ): Promise<{ runId: string; taskId?: string; cancelled: number }> {
    return this.api.request('cancel', {
      runId,
      ...(opts.taskId !== undefined && { taskId: opts.taskId }),
      ...(opts.reason !== undefined && { reason: opts.reason }),
    });
  }

  /** The run's state, its steps' states and its tasks per state, folded from its events. */
  async status(runId: string): Promise<RunStatus> {
    assertId('runId', runId);
    const updates = this.updates(runId, undefined, false);
    try {
      return ((await updates.next()).value as RunUpdate).status;
    } finally {
      await updates.return(undefined);
    }
  }

  /**
   * Follows a run: a first update with its events so far, then one per batch of new events,
   * each with the status after it; the iterator ends after the update in which the run ends
   * (at once for a run already ended). Reads only this run's events. Breaking out of the loop,
   * or `signal`, stops it.
   */
  watch(runId: string, opts: { signal?: AbortSignal } = {}): AsyncIterable<RunUpdate> {
    // It becomes a token of the subjects read: `a.>` would read other runs' events.
    assertId('runId', runId);
    return { [Symbol.asyncIterator]: () => this.updates(runId, opts.signal) };
  }

  private async *updates(
    runId: string,
    signal?: AbortSignal,
    withProgress = true,
  ): AsyncGenerator<RunUpdate> {
    try {
      const progress = withProgress ? await this.progressStore() : null;
      yield* watchRun(this.store, this.n, runId, signal, progress);
    } catch (err: unknown) {
      throw await explainMissingStreams(this.nc, this.n, err);
    }
  }

  /**
   * Resolves to the run's final status once it is Succeeded, Failed or Cancelled.
   *
   * @throws SonarError `timeout` after `timeoutMs`, naming the run's state then; the
   *   signal's reason when `signal` aborts first.
   */
  async wait(
    runId: string,
    opts: { signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<RunStatus> {
    const timeout =
      opts.timeoutMs === undefined ? null : AbortSignal.timeout(Math.max(0, opts.timeoutMs));
    const signals = [opts.signal, timeout].filter(
      (s): s is AbortSignal => s !== undefined && s !== null,
    );
    const signal = signals.length > 0 ? AbortSignal.any(signals) : undefined;
    let last: RunStatus | null = null;
    try {
      assertId('runId', runId);
      // The statuses only: no progress is read for a wait.
      for await (const { status } of this.updates(runId, signal, false)) {
        last = status;
        if (isRunEnded(status)) return status;
      }
    } catch (err: unknown) {
      if (!timeout?.aborted || opts.signal?.aborted) throw err;
      throw new SonarError(
        ErrorCode.Timeout,
        `run ${runId} did not end within ${opts.timeoutMs} ms (it is ${last?.state ?? 'not submitted'})`,
        { runId, status: last },
      );
    }
    // The watch ends only with the run; reaching here means it ended on the last update.
    return last!;
  }

  /** Every result the finalizers stored for the run (succeeded tasks), by task id. */
  async results(runId: string): Promise<TaskResult[]> {
    assertId('runId', runId);
    return this.explained(async () =>
      (await (await this.resultsReader()).list(runId)).map(taskResultOf),
    );
  }

  /**
   * One task's whole output: parsed JSON for a `json` step, bytes for a `bytes` step.
   *
   * @throws SonarError `not_found` when the task has no result (it has not succeeded).
   */
  async output(runId: string, taskId: string): Promise<unknown> {
    assertId('runId', runId);
    assertId('taskId', taskId);
    return this.explained(async () => {
      const r = await (await this.resultsReader()).get(runId, taskId);
      if (!r) {
        throw new SonarError(
          ErrorCode.NotFound,
          `no result for ${runId}.${taskId}: the task has not succeeded`,
          { runId, taskId },
        );
      }
      const bytes = await readOutput(r, () => this.outputs());
      return r.kind === 'json' ? (JSON.parse(new TextDecoder().decode(bytes)) as unknown) : bytes;
    });
  }

  /**
   * The latest progress of each of the run's tasks that reported any (`ctx.progress()`), or
   * of `taskIds` only (one read each, where the whole run costs a listing first), by task id;
   * an entry's `attempt` tells whether it is of the task's current attempt. A server that
   * keeps no progress, or a credential that may not read it, gives none.
   */
  async progress(runId: string, taskIds?: readonly string[]): Promise<Map<string, TaskProgress>> {
    assertId('runId', runId);
    const store = await this.progressStore();
    if (store === null) return new Map();
    return taskIds === undefined ? store.ofRun(runId) : store.ofTasks(runId, taskIds);
  }

  /**
   * One attempt's log (the latest unless `attempt` says), chunk by chunk: what the task wrote
   * to stdout and stderr, or to `ctx.log()`. With `follow`, goes on while the attempt runs.
   *
   * @throws SonarError `not_found` for a task or an attempt that does not exist.
   */
  logs(
    runId: string,
    taskId: string,
    opts: TaskLogOptions = {},
  ): AsyncIterable<LogChunk & { attempt: number }> {
    assertId('runId', runId);
    assertId('taskId', taskId);
    const read = async function* (c: SonarClient) {
      try {
        yield* taskLog(c.store, await jetstreamManagerOf(c.nc, c.n), c.n, runId, taskId, opts);
      } catch (err: unknown) {
        throw await explainMissingStreams(c.nc, c.n, err);
      }
    };
    return { [Symbol.asyncIterator]: () => read(this) };
  }

  /** The progress bucket; null on a server whose backends predate it. */
  private progressStore(): Promise<ProgressStore | null> {
    return (this.progressBucket ??= ProgressStore.open(this.nc, this.n).catch(() => {
      this.progressBucket = null;
      return null;
    }));
  }

  /** Runs `work`, explaining a "stream not found" from an unprovisioned prefix. */
  private async explained<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err: unknown) {
      throw await explainMissingStreams(this.nc, this.n, err);
    }
  }

  private outputs(): Promise<OutputStore> {
    this.outputStore ??= createOutputStore(this.nc, {
      prefix: this.n.prefix,
      s3: this.opts.outputs?.s3,
      maxOutputBytes: Number.MAX_SAFE_INTEGER,
    });
    return this.outputStore;
  }

  /** The results sink, opened once: the PostgreSQL table with `resultsUrl`, else the bucket. */
  private resultsReader(): Promise<ConfiguredSink> {
    this.resultsSink ??= createResultsSink(this.nc, {
      prefix: this.n.prefix,
      resultsUrl: this.opts.resultsUrl,
      // A reader holds one connection at most.
      finalizers: 1,
    }).catch((err: unknown) => {
      this.resultsSink = null;
      throw err;
    });
    return this.resultsSink;
  }

  async close(): Promise<void> {
    const sink = this.resultsSink;
    this.resultsSink = null;
    await (await sink?.catch(() => null))?.close?.();
    if (this.ownsConnection) await this.nc.close();
  }
}

/** A stored result (`results`): where the output is, not the output itself. */
export interface TaskResult {
  taskId: string;
  stepId: string;
  attemptId: string;
  kind: 'json' | 'bytes';
  /** The output's size. */
  bytes: number;
  finalizedAt: string;
  /** Its key in the output store; `output(runId, taskId)` reads it. */
  outputRef: string;
  /** The attempt's number; absent from records written by backends from before it. */
  attempt?: number;
  /** When the attempt started (server time); null or absent when not recorded. */
  startedAt?: string | null;
  /** When its result was accepted (server time); null or absent when not recorded. */
  finishedAt?: string | null;
}

/** A stored record as a {@link TaskResult}: what `results()` gives and `sonar results` prints. */
export const taskResultOf = (r: StoredResult): TaskResult => ({
  taskId: r.taskId,
  stepId: r.stepId,
  attemptId: r.attemptId,
  kind: r.kind,
  bytes: r.bytes,
  finalizedAt: r.finalizedAt,
  outputRef: r.outputRef,
  // Records of older backends lack them: absent, not undefined, in `--json`.
  ...(r.attempt !== undefined && { attempt: r.attempt }),
  ...(r.startedAt !== undefined && { startedAt: r.startedAt }),
  ...(r.finishedAt !== undefined && { finishedAt: r.finishedAt }),
});
