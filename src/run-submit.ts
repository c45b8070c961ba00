/**
 * The submit sequence of DESIGN.md section 6 (`submit.begin`, `submit.tasks` in chunks,
 * `submit.commit`), below both of its callers: the client SDK and the backend's schedule
 * submitter, which submits fired runs through the API like any client.
 */
import { SUBMIT_CHUNK_MAX_BYTES, SUBMIT_CHUNK_MAX_TASKS } from './limits.js';
import type { ParsedRunFile, RunFile, TaskSpecInput } from './protocol.js';
import { runFileHash, validateRunFile } from './run-file.js';
import { isApiError } from './worker/api-client.js';
import type { ApiClient } from './worker/api-client.js';

/** What `submit` and `submit.commit` answer. */
export interface Submitted {
  runId: string;
  taskCount: number;
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
 * Submits a run file: validated whole first (every problem listed, nothing sent), then
 * `submit.begin`, the tasks in chunks (`chunkConcurrency` in flight), and `submit.commit`.
 * Submitting the same file again completes a submit that was cut short.
 *
 * @throws ValidationError for a bad file; ApiError `conflict` when another file was already
 *   submitted under its runId.
 */
export async function submitRunFile(
  api: ApiClient,
  runFile: RunFile,
  opts: { maxInputBytes: number; chunkConcurrency: number },
): Promise<Submitted> {
  const file: ParsedRunFile = validateRunFile(runFile, {
    maxInputBytes: opts.maxInputBytes,
  });
  return submitParsedRunFile(api, file, opts);
}

/**
 * The requests of a submit, for a file already validated. With `traceparent`, every request
 * carries it, and the backend records it with the run as the run's trace context.
 */
export async function submitParsedRunFile(
  api: ApiClient,
  file: ParsedRunFile,
  opts: { chunkConcurrency: number; traceparent?: string | undefined },
): Promise<Submitted> {
  const call = opts.traceparent === undefined ? {} : { traceparent: opts.traceparent };
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
  await api.request('submit.begin', { ...begin, bytes }, call).catch((err: unknown) => {
    if (!isUnknownFieldRefusal(err, 'bytes')) throw err;
    return api.request('submit.begin', begin, call);
  });
  const chunks = file.steps.flatMap((s) =>
    chunkTasks(s.tasks).map((tasks) => ({ runId: file.runId, stepId: s.id, tasks })),
  );
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < chunks.length) await api.request('submit.tasks', chunks[next++]!, call);
  };
  const lanes = Math.max(1, opts.chunkConcurrency);
  await Promise.all(Array.from({ length: Math.min(lanes, chunks.length) }, lane));
  return api.request<'submit.commit', Submitted>('submit.commit', { runId: file.runId }, call);
}
