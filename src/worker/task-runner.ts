import { spawn } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import { constants } from 'node:os';
import { outputSizeProblem } from '../limits.js';
import { CommandFailedError } from './errors.js';
import { processEnvironment } from '../config.js';

/** Options of {@link runCommand}. */
export interface RunCommandOptions {
  /** Written to stdin as JSON; when undefined stdin is closed with nothing written. */
  input?: unknown;
  /** Added to the worker's own environment. */
  env?: Record<string, string>;
  /** Aborting sends SIGTERM, then SIGKILL {@link RunCommandOptions.killGraceMs} later. */
  signal?: AbortSignal;
  /**
   * @defaultValue 5000 (DESIGN.md section 6)
   */
  killGraceMs?: number;
  /** `SONAR_MAX_OUTPUT`: a command that writes more is killed and fails for good. */
  maxOutputBytes: number;
  /**
   * How much of the end of stderr a failure reports.
   * @defaultValue 4096
   */
  stderrTailBytes?: number;
  /**
   * Each piece of stderr as it comes, decoded as UTF-8: the attempt's log. Not stdout, which
   * is the task's output: readers of logs may not be allowed to read outputs.
   */
  onStderr?: (text: string) => void;
  /**
   * Each stderr line that starts with {@link PROGRESS_LINE_PREFIX}, with the rest of the line:
   * a command's way to report progress (`echo "sonar-progress: 0.5" >&2`).
   */
  onProgress?: (value: string) => void;
}

/** A stderr line starting with this reports progress; the line stays in the log too. */
export const PROGRESS_LINE_PREFIX = 'sonar-progress:';

const exitCodeOfSignal = (signal: NodeJS.Signals): number => 128 + (constants.signals[signal] ?? 0);

/**
 * Runs one task's command (argv, no shell) the way DESIGN.md section 6 says a CLI worker does:
 * the input as JSON on stdin, stdout is the output. Resolves with stdout on exit 0; a
 * non-zero exit rejects with a retryable CommandFailedError carrying the exit code and the
 * tail of stderr; a command that cannot start rejects with exit code -1.
 *
 * The command runs in its own process group: a Ctrl-C meant for the worker (which drains)
 * does not reach it, and an abort signals the whole group, children included.
 */
export function runCommand(argv: string[], opts: RunCommandOptions): Promise<Uint8Array> {
  const [file, ...args] = argv;
  if (file === undefined) {
    return Promise.reject(new CommandFailedError('the command is empty', -1, false));
  }
  const tailBytes = opts.stderrTailBytes ?? 4096;
  return new Promise<Uint8Array>((resolve, reject) => {
    const child = spawn(file, args, {
      env: processEnvironment.forChild(opts.env),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let tooMuch = false;
    let stderr = Buffer.alloc(0);
    let killTimer: NodeJS.Timeout | undefined;

    const signalGroup = (sig: NodeJS.Signals): void => {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // the group is gone already
      }
    };
    const terminate = (): void => {
      signalGroup('SIGTERM');
      killTimer ??= setTimeout(() => signalGroup('SIGKILL'), opts.killGraceMs ?? 5_000);
    };
    if (opts.signal?.aborted) terminate();
    opts.signal?.addEventListener('abort', terminate, { once: true });

    child.stdout.on('data', (chunk: Buffer) => {
      if (tooMuch) return;
      outBytes += chunk.length;
      if (outputSizeProblem(outBytes, opts.maxOutputBytes) !== null) {
        tooMuch = true;
        out.length = 0;
        signalGroup('SIGKILL');
        return;
      }
      out.push(chunk);
    });
    const stderrText = new StringDecoder('utf8');
    let partialLine = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > tailBytes * 2) stderr = stderr.subarray(stderr.length - tailBytes);
      const text = stderrText.write(chunk);
      opts.onStderr?.(text);
      if (opts.onProgress) {
        const lines = (partialLine + text).split('\n');
        // A line longer than the tail kept is no progress line: do not hold it.
        partialLine = (lines.pop() ?? '').slice(0, tailBytes);
        for (const line of lines) {
          if (line.startsWith(PROGRESS_LINE_PREFIX)) {
            opts.onProgress(line.slice(PROGRESS_LINE_PREFIX.length).trim());
          }
        }
      }
    });
    // A command that never reads stdin closes it early: EPIPE is not the task's failure.
    child.stdin.on('error', () => {});
    if (opts.input !== undefined) child.stdin.end(JSON.stringify(opts.input));
    else child.stdin.end();

    child.on('error', (err) => {
      opts.signal?.removeEventListener('abort', terminate);
      clearTimeout(killTimer);
      reject(new CommandFailedError(`cannot run ${JSON.stringify(file)}: ${err.message}`, -1));
    });
    child.on('close', (code, signal) => {
      opts.signal?.removeEventListener('abort', terminate);
      clearTimeout(killTimer);
      const tail = stderr
        .subarray(Math.max(0, stderr.length - tailBytes))
        .toString('utf8')
        .trim();
      if (tooMuch) {
        const problem = outputSizeProblem(outBytes, opts.maxOutputBytes) ?? '';
        reject(new CommandFailedError(`output ${problem}`, -1, false));
      } else if (code === 0) {
        const all = Buffer.concat(out);
        resolve(new Uint8Array(all.buffer, all.byteOffset, all.byteLength));
      } else {
        const exitCode = code ?? (signal ? exitCodeOfSignal(signal) : -1);
        const how = code !== null ? `exited with code ${code}` : `was killed by ${signal}`;
        reject(
          new CommandFailedError(
            `${JSON.stringify(file)} ${how}${tail ? `: ${tail}` : ''}`,
            exitCode,
          ),
        );
      }
    });
  });
}
