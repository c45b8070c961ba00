import { KvWatchInclude, Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';
import { jetstreamOf } from '../../streams/jetstream-api.js';

/** The latest progress a task's attempt reported (`ctx.progress(value)`). */
export interface TaskProgress {
  runId: string;
  taskId: string;
  /** The attempt that reported it: progress of an earlier attempt is stale. */
  attempt: number;
  workerId: string;
  /** What the handler reported: any JSON of at most PROGRESS_MAX_BYTES. */
  value: unknown;
  /** When the backend stored it. */
  at: string;
}

const isProgress = (v: unknown): v is TaskProgress =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as TaskProgress).runId === 'string' &&
  typeof (v as TaskProgress).taskId === 'string' &&
  typeof (v as TaskProgress).attempt === 'number' &&
  typeof (v as TaskProgress).at === 'string';

const decode = (data: Uint8Array): TaskProgress | null => {
  try {
    const v: unknown = JSON.parse(new TextDecoder().decode(data));
    return isProgress(v) ? v : null;
  } catch {
    return null;
  }
};

/**
 * The `progress` bucket: one key per task, `<runId>.<taskId>`, holding its latest progress.
 * Written by backends only (for the attempt's holder); read by `status`, `watch()` and the
 * dashboard.
 */
export class ProgressStore {
  private constructor(readonly kv: KV) {}

  static async open(nc: NatsConnection, n: Names): Promise<ProgressStore> {
    return new ProgressStore(await new Kvm(await jetstreamOf(nc, n)).open(n.buckets.progress));
  }

  async put(p: TaskProgress): Promise<void> {
    await this.kv.put(`${p.runId}.${p.taskId}`, JSON.stringify(p));
  }

  /**
   * The task's latest progress, or null. Reads never fail: progress is an aid, and a server
   * whose backends predate the bucket, or a credential made before readers could read it,
   * has none to show.
   */
  async get(runId: string, taskId: string): Promise<TaskProgress | null> {
    try {
      const e = await this.kv.get(`${runId}.${taskId}`);
      return e === null || e.operation !== 'PUT' ? null : decode(e.value);
    } catch {
      return null;
    }
  }

  /** The latest progress of these tasks of the run (those with any), by task id. */
  async ofTasks(runId: string, taskIds: readonly string[]): Promise<Map<string, TaskProgress>> {
    const found = await Promise.all(taskIds.map((t) => this.get(runId, t)));
    return new Map(found.filter((p): p is TaskProgress => p !== null).map((p) => [p.taskId, p]));
  }

  /** Every task of the run with progress, by task id (a keys listing, then a get each). */
  async ofRun(runId: string): Promise<Map<string, TaskProgress>> {
    const keys: string[] = [];
    try {
      for await (const k of await this.kv.keys(`${runId}.*`)) keys.push(k);
    } catch {
      return new Map();
    }
    return this.ofTasks(
      runId,
      keys.map((k) => k.slice(runId.length + 1)),
    );
  }

  /**
   * Each progress of the run as it is stored, the latest of every task first (unless
   * `updatesOnly`); ends when `signal` fires, or at once when the bucket cannot be read.
   */
  async *watch(
    runId: string,
    signal?: AbortSignal,
    opts: { updatesOnly?: boolean } = {},
  ): AsyncGenerator<TaskProgress> {
    const it = await this.kv
      .watch({
        key: `${runId}.*`,
        ...(opts.updatesOnly && { include: KvWatchInclude.UpdatesOnly }),
      })
      .catch(() => null);
    if (it === null) return;
    const stop = (): void => it.stop();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      for await (const e of it) {
        if (e.operation !== 'PUT') continue;
        const p = decode(e.value);
        if (p !== null) yield p;
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      it.stop();
    }
  }
}
