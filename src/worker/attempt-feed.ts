import { LOG_CHUNK_BYTES } from '../../streams/topology.js';
import { PROGRESS_MAX_BYTES } from '../protocol.js';
import type { RequestOf } from '../protocol.js';
import type { LogStream } from '../storage/task-logs.js';

/** At most one progress report per task this often: readers want the latest, not each. */
export const PROGRESS_INTERVAL_MS = 2_000;
/** Log output is gathered this long before it is sent. */
export const LOG_FLUSH_MS = 1_000;
/** How long the attempt's end waits for its last reports before the result goes anyway. */
const CLOSE_WAIT_MS = 5_000;

type Creds = Pick<RequestOf<'log'>, 'runId' | 'taskId' | 'attemptId' | 'token' | 'workerId'>;

/** How a feed sends its reports (the worker's API client); a failure is the feed's to log. */
export type FeedSend = <V extends 'progress' | 'log'>(verb: V, body: RequestOf<V>) => Promise<void>;

interface Segment {
  stream: LogStream;
  text: string;
}

const bytesOf = (text: string): number => Buffer.byteLength(text, 'utf8');

/** The last `max` bytes of `text`, starting on a whole character. */
function tailOf(text: string, max: number): string {
  const b = Buffer.from(text, 'utf8');
  let start = b.length - max;
  // Skip UTF-8 continuation bytes: never start inside a character.
  while (start < b.length && (b[start]! & 0xc0) === 0x80) start++;
  return b.subarray(start).toString('utf8');
}

/**
 * What one running attempt reports besides its result: its latest progress, at most every
 * PROGRESS_INTERVAL_MS, and its stdout and stderr, gathered for LOG_FLUSH_MS and sent in
 * order. Best effort: a report that fails is dropped (a backend that predates these verbs
 * refuses them), and a writer faster than the feed loses the middle of its output, never the
 * tail. Reports go one at a time, so chunks are stored in the order written.
 */
export class AttemptFeed {
  private pendingProgress: { value: unknown } | null = null;
  private lastProgressAt = -Infinity;
  private progressTimer: NodeJS.Timeout | undefined;
  private segments: Segment[] = [];
  private bytes = 0;
  private dropped = 0;
  private logTimer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  /** Whether any of the log went out: only then does the log need an end. */
  private logSent = false;

  constructor(
    private readonly creds: Creds,
    private readonly send: FeedSend,
    /** Told of each report not stored (the worker logs it). */
    private readonly notStored: (verb: 'progress' | 'log', err: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Reports the task's progress: any JSON value of at most PROGRESS_MAX_BYTES (a fraction,
   * `{ done, total }`, a short message). Only the latest is kept.
   *
   * @throws TypeError when the value is not JSON or too large.
   */
  progress(value: unknown): void {
    const json = value === undefined ? undefined : JSON.stringify(value);
    if (json === undefined) throw new TypeError('progress: the value must be a JSON value');
    if (bytesOf(json) > PROGRESS_MAX_BYTES) {
      throw new TypeError(
        `progress: the value is ${bytesOf(json)} bytes of JSON, more than ${PROGRESS_MAX_BYTES}`,
      );
    }
    if (this.closed) return;
    this.pendingProgress = { value: JSON.parse(json) as unknown };
    if (this.progressTimer !== undefined) return;
    const wait = Math.max(0, this.lastProgressAt + PROGRESS_INTERVAL_MS - this.now());
    this.progressTimer = setTimeout(() => this.flushProgress(), wait);
    this.progressTimer.unref();
  }

  /** Adds output to the attempt's log (`sonar logs`). */
  write(stream: LogStream, text: string): void {
    if (this.closed || text === '') return;
    const last = this.segments.at(-1);
    if (last?.stream === stream) last.text += text;
    else this.segments.push({ stream, text });
    this.bytes += bytesOf(text);
    if (this.bytes > LOG_CHUNK_BYTES) this.keepTail();
    this.logTimer ??= setTimeout(() => this.flushLog(false), LOG_FLUSH_MS);
    this.logTimer.unref();
  }

  /**
   * The attempt ended: sends what is left and the log's end, waiting at most CLOSE_WAIT_MS
   * (the result must not wait on an aid).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.flushProgress();
    this.flushLog(true);
    this.closed = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.chain,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, CLOSE_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  /** Drops the oldest output so that at most LOG_CHUNK_BYTES wait. */
  private keepTail(): void {
    while (this.bytes > LOG_CHUNK_BYTES) {
      const first = this.segments[0]!;
      const size = bytesOf(first.text);
      const over = this.bytes - LOG_CHUNK_BYTES;
      if (size <= over) {
        this.segments.shift();
        this.bytes -= size;
        this.dropped += size;
      } else {
        const kept = tailOf(first.text, size - over);
        const keptBytes = bytesOf(kept);
        this.dropped += size - keptBytes;
        this.bytes -= size - keptBytes;
        first.text = kept;
      }
    }
  }

  private flushProgress(): void {
    clearTimeout(this.progressTimer);
    this.progressTimer = undefined;
    const p = this.pendingProgress;
    if (p === null || this.closed) return;
    this.pendingProgress = null;
    this.lastProgressAt = this.now();
    this.enqueue('progress', { ...this.creds, value: p.value });
  }

  private flushLog(end: boolean): void {
    clearTimeout(this.logTimer);
    this.logTimer = undefined;
    if (this.closed) return;
    const segments = this.segments;
    let dropped = this.dropped;
    this.segments = [];
    this.bytes = 0;
    this.dropped = 0;
    segments.forEach((s, i) => {
      const last = end && i === segments.length - 1;
      this.enqueue('log', { ...this.creds, stream: s.stream, text: s.text, dropped, end: last });
      dropped = 0;
    });
    // An attempt that wrote nothing sends nothing, not even an end: most tasks log nothing,
    // and a follower sees such an attempt end by its events.
    if (end && segments.length === 0 && this.logSent) {
      this.enqueue('log', { ...this.creds, stream: 'stderr', text: '', dropped, end: true });
    }
    if (segments.length > 0) this.logSent = true;
  }

  private enqueue<V extends 'progress' | 'log'>(verb: V, body: RequestOf<V>): void {
    this.chain = this.chain.then(() =>
      this.send(verb, body).catch((err: unknown) => this.notStored(verb, err)),
    );
  }
}
