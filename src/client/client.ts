import type { NatsConnection } from '@nats-io/transport-node';
import { assertId } from '../../actors/ids.js';
import { applyEvent, createProjection } from '../../actors/projection.js';
import type { EventRecord } from '../../actors/projection.js';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { SUBMIT_CHUNK_MAX_BYTES, SUBMIT_CHUNK_MAX_TASKS } from '../limits.js';
import type { Logger } from '../log.js';
import { connectNats } from '../nats.js';
import type { ConnectSettings } from '../nats.js';
import type { ParsedRunFile, TaskSpecInput } from '../protocol.js';
import { ApiClient, isApiError } from '../worker/api-client.js';
import { runFileHash, validateRunFile } from '../run-file.js';

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
  log?: Logger;
}

/** What `submit` and `submit.commit` answer. */
export interface Submitted {
  runId: string;
  taskCount: number;
}

/** A run as its events tell it (`status`). */
export interface RunStatus {
  runId: string;
  /** `Running`, `Succeeded`, `Failed`, `Cancelled`; null while not (fully) submitted. */
  state: string | null;
  taskCount: number;
  steps: Record<string, string>;
  /** Tasks per state, e.g. `{ Pending: 3, Succeeded: 7 }`. */
  tasks: Record<string, number>;
}

/** A `validation` answer that names `field` as an unknown key (zod's unrecognized_keys). */
function isUnknownFieldRefusal(err: unknown, field: string): boolean {
  if (!isApiError(err, 'validation')) return false;
  const issues = (err.details['issues'] ?? []) as { path?: unknown; message?: unknown }[];
  return (
    Array.isArray(issues) &&
    issues.some((i) => typeof i.message === 'string' && i.message.includes(`"${field}"`))
  );
}

/** Splits tasks into chunks of at most 1,000 tasks and 512 KiB of JSON. */
export function chunkTasks(tasks: TaskSpecInput[]): TaskSpecInput[][] {
  const chunks: TaskSpecInput[][] = [];
  let current: TaskSpecInput[] = [];
  // Room for the chunk's envelope (`{"runId":..,"stepId":..,"tasks":[...]}`).
  const budget = SUBMIT_CHUNK_MAX_BYTES - 1024;
  let bytes = 2;
  for (const t of tasks) {
    const size = Buffer.byteLength(JSON.stringify(t), 'utf8') + 1;
    if (current.length > 0 && (current.length >= SUBMIT_CHUNK_MAX_TASKS || bytes + size > budget)) {
      chunks.push(current);
      current = [];
      bytes = 2;
    }
    current.push(t);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * The client SDK (DESIGN.md sections 6 and 8): submits run files in chunks, cancels runs and
 * tasks, and reads a run's status from its events. `sonar submit` and `sonar cancel` use it.
 */
export class SonarClient {
  private readonly api: ApiClient;
  private readonly n: Names;
  private readonly store: EventStore;

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
   * Submits a run file: validated whole first (every problem listed, nothing sent), then
   * `submit.begin`, the tasks in chunks (a few in flight), and `submit.commit`. Submitting
   * the same file again completes a submit that was cut short.
   *
   * @throws ValidationError for a bad file; ApiError `conflict` when another file was already
   *   submitted under its runId.
   */
  async submit(runFile: unknown): Promise<Submitted> {
    const file: ParsedRunFile = validateRunFile(runFile, {
      maxInputBytes: this.opts.maxInputBytes ?? 256 * 1024,
    });
    const taskCount = file.steps.reduce((n, s) => n + s.tasks.length, 0);
    const begin = {
      runId: file.runId,
      hash: runFileHash(file),
      steps: file.steps.map(({ tasks, ...step }) => ({ ...step, taskCount: tasks.length })),
      taskCount,
    };
    // `bytes` lets the backend refuse a run too large for the event log before it writes
    // anything; a backend older than the field refuses it as unknown: ask again without it.
    const bytes = file.steps.reduce((n, s) => n + Buffer.byteLength(JSON.stringify(s.tasks)), 0);
    await this.api.request('submit.begin', { ...begin, bytes }).catch((err: unknown) => {
      if (!isUnknownFieldRefusal(err, 'bytes')) throw err;
      return this.api.request('submit.begin', begin);
    });
    const chunks = file.steps.flatMap((s) =>
      chunkTasks(s.tasks).map((tasks) => ({ runId: file.runId, stepId: s.id, tasks })),
    );
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < chunks.length) await this.api.request('submit.tasks', chunks[next++]!);
    };
    const lanes = Math.max(1, this.opts.chunkConcurrency ?? 4);
    await Promise.all(Array.from({ length: Math.min(lanes, chunks.length) }, lane));
    return this.api.request<'submit.commit', Submitted>('submit.commit', { runId: file.runId });
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
    // It becomes a token of the subjects read: `a.>` would read other runs' events.
    assertId('runId', runId);
    const records: EventRecord[] = [];
    for (const filter of this.n.subjects.runAll(runId)) {
      await this.store.replay((r) => void records.push(r), { filter });
    }
    records.sort((a, b) => a.seq - b.seq);
    const p = createProjection();
    for (const r of records) applyEvent(p, r);
    const run = p.runs.get(runId)?.snapshot;
    const steps: Record<string, string> = {};
    for (const [key, s] of p.steps) steps[key.slice(runId.length + 1)] = s.snapshot.value;
    const tasks: Record<string, number> = {};
    for (const t of p.tasks.values()) tasks[t.snapshot.value] = (tasks[t.snapshot.value] ?? 0) + 1;
    return {
      runId,
      state: run?.value ?? null,
      taskCount: run?.context.taskCount ?? p.tasks.size,
      steps,
      tasks,
    };
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.nc.close();
  }
}
