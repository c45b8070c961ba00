import { setTimeout as delay } from 'node:timers/promises';
import type { JetStreamManager } from '@nats-io/jetstream';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import type { EventRecord } from '../../actors/projection.js';
import type { EventStore } from '../../streams/event-store.js';
import type { Names } from '../../streams/names.js';
import { readLogChunks } from '../storage/task-logs.js';
import type { LogChunk } from '../storage/task-logs.js';

/** Options of `SonarClient.logs()`. */
export interface TaskLogOptions {
  /** Which attempt (the task's publish count, from 1). Default: the latest. */
  attempt?: number;
  /** Go on while the attempt runs (until its events say it is over); stops on `signal`. */
  follow?: boolean;
  signal?: AbortSignal;
}

const attemptOf = (r: EventRecord): number | null => {
  const a = (r.data as { attempt?: unknown } | null)?.attempt;
  return r.type === 'TaskPublished' && typeof a === 'number' ? a : null;
};

/** How often a follower looks whether a task not yet published has its first attempt. */
const WAIT_FOR_ATTEMPT_MS = 500;

/** Whether the task ended without running again (cancelled, dead, finalized...). */
const ended = (events: EventRecord[]): boolean =>
  events.some((r) => ENDED_TASK_EVENTS.has(String(r.type)));
const ENDED_TASK_EVENTS: ReadonlySet<string> = new Set([
  'TaskCancelled',
  'TaskDead',
  'TaskFinalized',
]);

/** The task's latest attempt, and whether it is still out (published or running). */
function attemptState(events: EventRecord[]): { latest: number; open: boolean } {
  let latest = 0;
  let open = false;
  for (const r of events) {
    const a = attemptOf(r);
    if (a !== null) {
      latest = a;
      open = true;
    } else if (r.type !== 'TaskStarted' && r.type !== 'TaskCreated') {
      open = false;
    }
  }
  return { latest, open };
}

/**
 * One attempt's log, chunk by chunk, oldest first: what its worker wrote to stdout and
 * stderr, as stored (the newest part of a long log). Reads the task's own events to find
 * the attempt and, when following, whether it still runs.
 *
 * @throws SonarError `not_found` for a task with no events, or an attempt it never had.
 */
export async function* taskLog(
  store: EventStore,
  jsm: JetStreamManager,
  n: Names,
  runId: string,
  taskId: string,
  opts: TaskLogOptions = {},
): AsyncGenerator<LogChunk & { attempt: number }> {
  const subject = n.subjects.task(runId, taskId);
  let events = await store.readAggregate(subject);
  if (events.length === 0) {
    throw new SonarError(ErrorCode.NotFound, `no task ${runId}.${taskId}`, { runId, taskId });
  }
  // Following a task not yet published waits for its first attempt, while it can have one.
  while (opts.follow && attemptState(events).latest === 0 && !ended(events)) {
    if (opts.signal?.aborted) return;
    await delay(WAIT_FOR_ATTEMPT_MS, undefined, { signal: opts.signal }).catch(() => undefined);
    events = await store.readAggregate(subject);
  }
  const { latest } = attemptState(events);
  const attempt = opts.attempt ?? latest;
  if (latest === 0 || attempt < 1 || attempt > latest) {
    throw new SonarError(
      ErrorCode.NotFound,
      latest === 0
        ? `task ${runId}.${taskId} has no attempt yet`
        : `task ${runId}.${taskId} has no attempt ${attempt} (it has 1 to ${latest})`,
      { runId, taskId, attempt },
    );
  }
  // Stops the read when the caller breaks out of the loop, as well as on its signal.
  const ac = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, ac.signal]) : ac.signal;
  const chunks: LogChunk[] = [];
  let wake: (() => void) | null = null;
  let done = false;
  const failure: { error: Error | null } = { error: null };
  const running = async (): Promise<boolean> => {
    const now = attemptState(await store.readAggregate(subject));
    return now.latest === attempt && now.open;
  };
  const reading = readLogChunks(
    jsm,
    n,
    { runId, taskId, attempt },
    (c) => {
      chunks.push(c);
      wake?.();
    },
    opts.follow ? { follow: { running, signal } } : { signal },
  ).then(
    () => {
      done = true;
      wake?.();
    },
    (err: unknown) => {
      failure.error = err instanceof Error ? err : new Error(String(err));
      done = true;
      wake?.();
    },
  );
  try {
    for (;;) {
      const c = chunks.shift();
      if (c !== undefined) {
        yield { ...c, attempt };
        continue;
      }
      if (done) break;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = null;
    }
    if (failure.error !== null) throw failure.error;
  } finally {
    ac.abort();
    await reading;
  }
}
