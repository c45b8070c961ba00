import { setTimeout as delay } from 'node:timers/promises';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Names } from '../../streams/names.js';

/** Which of an attempt's outputs a piece comes from. */
export type LogStream = 'stdout' | 'stderr';

/** One attempt of one task: where its log lives. */
export interface AttemptRef {
  runId: string;
  taskId: string;
  /** The task's publish count at that attempt (`TaskPublished.attempt`). */
  attempt: number;
}

/** One piece of an attempt's log, as readers get it. */
export interface LogChunk {
  stream: LogStream;
  text: string;
  /** Bytes the worker dropped just before this piece (it keeps the tail of a fast writer). */
  dropped: number;
  /** When the backend stored it (the server's clock). */
  at: string;
  /** The worker's number of the chunk this piece came in (from 1). */
  seq: number;
}

/** A stored chunk: what the attempt wrote between two of its worker's flushes. */
interface StoredChunk {
  seq: number;
  parts: { stream: LogStream; text: string }[];
  dropped: number;
}

const isStoredChunk = (v: unknown): v is StoredChunk =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as StoredChunk).seq === 'number' &&
  Array.isArray((v as StoredChunk).parts);

/** How often a follower looks for new chunks. */
const FOLLOW_POLL_MS = 500;
/** A follower asks whether the attempt still runs every this many polls. */
const RUNNING_CHECK_POLLS = 4;

/**
 * Stores one chunk of an attempt's log (the backend, for the attempt's holder). Its message
 * id is the attempt's and the chunk's: a chunk whose reply was lost and that is sent again,
 * to this backend or another, is stored once.
 */
export async function appendLogChunk(
  js: JetStreamClient,
  n: Names,
  ref: AttemptRef & { attemptId: string },
  chunk: StoredChunk,
): Promise<void> {
  const body: StoredChunk = { seq: chunk.seq, parts: chunk.parts, dropped: chunk.dropped };
  await js.publish(n.subjects.logs(ref.runId, ref.taskId, ref.attempt), JSON.stringify(body), {
    msgID: `log.${ref.attemptId}.${chunk.seq}`,
  });
}

/** Options of {@link readLogChunks}. */
export interface ReadLogOptions {
  /**
   * Keep reading new chunks until `running()` says the attempt is over (its events say so),
   * or `signal` fires.
   */
  follow?: { running: () => Promise<boolean>; signal?: AbortSignal };
  /** Stops the read (a reader that has what it wanted). */
  signal?: AbortSignal;
}

/**
 * Calls `onChunk` with each stored piece of an attempt's log, oldest first. Reads by direct
 * get, one chunk after another (an attempt keeps at most LOG_CHUNKS_PER_ATTEMPT): no consumer
 * is made, so a reader needs only the stream's direct get. A chunk stored twice (a retry
 * outside the dedupe window) is shown once.
 */
export async function readLogChunks(
  jsm: JetStreamManager,
  n: Names,
  ref: AttemptRef,
  onChunk: (chunk: LogChunk) => void,
  opts: ReadLogOptions = {},
): Promise<void> {
  const subject = n.subjects.logs(ref.runId, ref.taskId, ref.attempt);
  let seq = 1;
  let lastChunk = 0;
  let polls = 0;
  const stopped = (): boolean =>
    opts.signal?.aborted === true || opts.follow?.signal?.aborted === true;
  while (!stopped()) {
    const m = await jsm.direct.getMessage(n.streams.logs, { seq, next_by_subj: subject });
    if (m !== null) {
      seq = m.seq + 1;
      let chunk: unknown;
      try {
        chunk = m.json();
      } catch {
        continue;
      }
      if (!isStoredChunk(chunk) || chunk.seq <= lastChunk) continue;
      lastChunk = chunk.seq;
      const at = m.time.toISOString();
      chunk.parts.forEach((p, i) => {
        const stream: LogStream = p.stream === 'stdout' ? 'stdout' : 'stderr';
        const dropped = i === 0 ? chunk.dropped : 0;
        onChunk({ stream, text: String(p.text), dropped, at, seq: chunk.seq });
      });
      continue;
    }
    const follow = opts.follow;
    if (follow === undefined) return;
    if (++polls % RUNNING_CHECK_POLLS === 0 && !(await follow.running())) {
      // The attempt is over: what its worker sent last may have been stored after this read.
      const late = await jsm.direct.getMessage(n.streams.logs, { seq, next_by_subj: subject });
      if (late === null) return;
      continue;
    }
    await delay(FOLLOW_POLL_MS, undefined, { signal: follow.signal ?? opts.signal }).catch(
      () => undefined,
    );
  }
}

/** The attempt's newest stored chunk, for a page that shows the end of a log: one read. */
export async function lastLogChunk(
  jsm: JetStreamManager,
  n: Names,
  ref: AttemptRef,
): Promise<LogChunk[]> {
  const m = await jsm.direct
    .getMessage(n.streams.logs, {
      last_by_subj: n.subjects.logs(ref.runId, ref.taskId, ref.attempt),
    })
    .catch(() => null);
  if (m === null) return [];
  let chunk: unknown;
  try {
    chunk = m.json();
  } catch {
    return [];
  }
  if (!isStoredChunk(chunk)) return [];
  const at = m.time.toISOString();
  return chunk.parts.map((p, i) => ({
    stream: p.stream === 'stdout' ? 'stdout' : 'stderr',
    text: String(p.text),
    dropped: i === 0 ? chunk.dropped : 0,
    at,
    seq: chunk.seq,
  }));
}
