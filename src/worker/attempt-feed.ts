import { LOG_CHUNK_BYTES } from '../../streams/topology.js';
import { LOG_PARTS_MAX, PROGRESS_MAX_BYTES } from '../protocol.js';
import type { RequestOf } from '../protocol.js';
import type { LogStream } from '../storage/task-logs.js';

/** At most one progress report per task this often: readers want the latest, not each. */
export const PROGRESS_INTERVAL_MS = 2_000;
/** Log output is gathered this long before it is sent. */
export const LOG_FLUSH_MS = 1_000;
/** How long the attempt's end waits for its last log chunk before the result goes anyway. */
const CLOSE_WAIT_MS = 2_000;

type Creds = Pick<RequestOf<'log'>, 'runId' | 'taskId' | 'attemptId' | 'token' | 'workerId'>;

/** How a feed sends its reports (the worker's API client); a failure is the feed's to log. */
export type FeedSend = <V extends 'progress' | 'log'>(verb: V, body: RequestOf<V>) => Promise<void>;

interface Part {
  stream: LogStream;
  text: string;
}

const bytesOf = (text: string): number => Buffer.byteLength(text, 'utf8');

/** The last `max` bytes of `text`, starting on a whole character. */
function tailOf(text: string, max: number): string {
  const b = Buffer.from(text, 'utf8');
  let start = Math.max(0, b.length - max);
  // Skip UTF-8 continuation bytes: never start inside a character.
  while (start < b.length && (b[start]! & 0xc0) === 0x80) start++;
  return b.subarray(start).toString('utf8');
}

/**
 * What one running attempt reports besides its result: its latest progress, at most every
 * PROGRESS_INTERVAL_MS, and its stdout and stderr, gathered for LOG_FLUSH_MS and sent as one
 * numbered chunk. Best effort: a report that fails is dropped (a backend that predates these
 * verbs refuses them). One chunk is in flight at a time, and what is written meanwhile waits
 * for the next, keeping only the newest LOG_CHUNK_BYTES: a writer faster than the feed loses
 * the middle of its output, never the tail, and the feed holds a bounded amount however slow
 * the backend answers.
 */
export class AttemptFeed {
  private pendingProgress: { value: unknown } | null = null;
  private lastProgressAt = -Infinity;
  private progressTimer: NodeJS.Timeout | undefined;
  private progressInFlight: Promise<void> | null = null;
  private parts: Part[] = [];
  private bytes = 0;
  private dropped = 0;
  private seq = 0;
  private logTimer: NodeJS.Timeout | undefined;
  private logInFlight: Promise<void> | null = null;
  private closed = false;

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
    this.scheduleProgress();
  }

  /** Adds output to the attempt's log (`sonar logs`). */
  write(stream: LogStream, text: string): void {
    if (this.closed || text === '') return;
    const last = this.parts.at(-1);
    if (last?.stream === stream) last.text += text;
    else this.parts.push({ stream, text });
    this.bytes += bytesOf(text);
    // Trimmed lazily, past twice the bound: a fast writer costs no re-encoding per write.
    if (this.bytes > 2 * LOG_CHUNK_BYTES || this.parts.length > 2 * LOG_PARTS_MAX) {
      this.keepTail();
    }
    this.scheduleLog(LOG_FLUSH_MS);
  }

  /**
   * The attempt ended: sends the rest of its log, waiting at most CLOSE_WAIT_MS (the result
   * must not wait on an aid). Progress still pending is dropped: nobody shows the progress
   * of an attempt that is over.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.progressTimer);
    clearTimeout(this.logTimer);
    const last = (async () => {
      await this.logInFlight;
      this.flushLog();
      await this.logInFlight;
    })();
    this.closed = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      last,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, CLOSE_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  /** The attempt was stopped early (cancelled, given up): nothing more is sent. */
  abandon(): void {
    this.closed = true;
    clearTimeout(this.progressTimer);
    clearTimeout(this.logTimer);
  }

  /** Drops the oldest output so that at most LOG_CHUNK_BYTES in LOG_PARTS_MAX parts wait. */
  private keepTail(): void {
    while (this.parts.length > LOG_PARTS_MAX) {
      const size = bytesOf(this.parts.shift()!.text);
      this.bytes -= size;
      this.dropped += size;
    }
    while (this.bytes > LOG_CHUNK_BYTES) {
      const first = this.parts[0]!;
      const size = bytesOf(first.text);
      const over = this.bytes - LOG_CHUNK_BYTES;
      if (size <= over) {
        this.parts.shift();
        this.bytes -= size;
        this.dropped += size;
      } else {
        const kept = tailOf(first.text, size - over);
        const lost = size - bytesOf(kept);
        this.dropped += lost;
        this.bytes -= lost;
        first.text = kept;
      }
    }
  }

  private scheduleProgress(): void {
    if (this.progressTimer !== undefined || this.progressInFlight !== null) return;
    const wait = Math.max(0, this.lastProgressAt + PROGRESS_INTERVAL_MS - this.now());
    this.progressTimer = setTimeout(() => this.flushProgress(), wait);
    this.progressTimer.unref();
  }

  private flushProgress(): void {
    this.progressTimer = undefined;
    const p = this.pendingProgress;
    if (p === null || this.closed) return;
    this.pendingProgress = null;
    this.lastProgressAt = this.now();
    this.progressInFlight = this.send('progress', { ...this.creds, value: p.value })
      .catch((err: unknown) => this.notStored('progress', err))
      .finally(() => {
        this.progressInFlight = null;
        if (this.pendingProgress !== null) this.scheduleProgress();
      });
  }

  private scheduleLog(ms: number): void {
    if (this.logTimer !== undefined || this.logInFlight !== null || this.closed) return;
    this.logTimer = setTimeout(() => {
      this.logTimer = undefined;
      this.flushLog();
    }, ms);
    this.logTimer.unref();
  }

  private flushLog(): void {
    if (this.parts.length === 0 || this.logInFlight !== null) return;
    this.keepTail();
    const body = {
      ...this.creds,
      seq: ++this.seq,
      parts: this.parts,
      dropped: this.dropped,
    };
    this.parts = [];
    this.bytes = 0;
    this.dropped = 0;
    this.logInFlight = this.send('log', body)
      .catch((err: unknown) => this.notStored('log', err))
      .finally(() => {
        this.logInFlight = null;
        if (this.parts.length > 0) this.scheduleLog(0);
      });
  }
}
