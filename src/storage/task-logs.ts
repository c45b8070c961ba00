import { setTimeout as delay } from 'node:timers/promises';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';

/** Which of an attempt's outputs a chunk comes from. */
export type LogStream = 'stdout' | 'stderr';

/** One attempt of one task: where its log lives. */
export interface AttemptRef {
  runId: string;
  taskId: string;
  /** The task's publish count at that attempt (`TaskPublished.attempt`). */
  attempt: number;
}

/** One stored piece of an attempt's log. */
export interface LogChunk {
  stream: LogStream;
  text: string;
  /** Bytes the worker dropped just before this chunk (it keeps the tail of a fast writer). */
  dropped: number;
  /** The attempt's last chunk. */
  end: boolean;
  /** When the backend stored it (the server's clock). */
  at: string;
  seq: number;
}

const STREAM_HEADER = 'Sonar-Log-Stream';
const DROPPED_HEADER = 'Sonar-Log-Dropped';
const END_HEADER = 'Sonar-Log-End';

/** How often a follower looks for new chunks. */
const FOLLOW_POLL_MS = 500;

/** Stores one chunk of an attempt's log (the backend, for the attempt's holder). */
export async function appendLogChunk(
  js: JetStreamClient,
  n: Names,
  ref: AttemptRef,
  chunk: Pick<LogChunk, 'stream' | 'text' | 'dropped' | 'end'>,
): Promise<void> {
  const h = headers();
  h.set(STREAM_HEADER, chunk.stream);
  if (chunk.dropped > 0) h.set(DROPPED_HEADER, String(chunk.dropped));
  if (chunk.end) h.set(END_HEADER, 'true');
  await js.publish(n.subjects.logs(ref.runId, ref.taskId, ref.attempt), chunk.text, {
    headers: h,
  });
}

/** Options of {@link readLogChunks}. */
export interface ReadLogOptions {
  /**
   * Keep reading new chunks until the attempt's last one, or until `running()` says the
   * attempt is over (a worker that died sends no last chunk).
   */
  follow?: { running: () => Promise<boolean>; signal?: AbortSignal };
}

/**
 * Calls `onChunk` with each stored chunk of an attempt's log, oldest first. Reads by direct
 * get, one chunk after another (an attempt keeps at most LOG_CHUNKS_PER_ATTEMPT): no
 * consumer is made, so a reader needs only the stream's direct get.
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
  for (;;) {
    const m = await jsm.direct.getMessage(n.streams.logs, { seq, next_by_subj: subject });
    if (m !== null) {
      const chunk: LogChunk = {
        stream: m.header.get(STREAM_HEADER) === 'stdout' ? 'stdout' : 'stderr',
        text: m.string(),
        dropped: Number(m.header.get(DROPPED_HEADER) || 0),
        end: m.header.get(END_HEADER) === 'true',
        at: m.time.toISOString(),
        seq: m.seq,
      };
      seq = m.seq + 1;
      onChunk(chunk);
      if (chunk.end) return;
      continue;
    }
    const follow = opts.follow;
    if (follow === undefined || follow.signal?.aborted) return;
    if (!(await follow.running())) {
      // The attempt ended without a last chunk, or its last chunk came after this read.
      const late = await jsm.direct.getMessage(n.streams.logs, { seq, next_by_subj: subject });
      if (late === null) return;
      continue;
    }
    await delay(FOLLOW_POLL_MS, undefined, { signal: follow.signal }).catch(() => undefined);
  }
}
