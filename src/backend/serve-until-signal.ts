import type { Backend } from './backend.js';

/** Beyond the grace, what the process allows itself to close the connection and log. */
const EXIT_MARGIN_MS = 2_000;

export interface ServeOptions {
  /** SONAR_STOP_GRACE: the backend's stop is bounded by it. */
  graceMs: number;
  /** Ends the process (tests replace it). @defaultValue `process.exit` */
  exit?: (code: number) => void;
}

/**
 * Runs a started backend until SIGTERM or SIGINT, then stops it within SONAR_STOP_GRACE and
 * lets the process end. A part that was left running (a finalizer stuck in a slow sink
 * write) still holds timers and sockets that would keep Node alive: the process exits anyway,
 * and the job's lease brings it back to another backend. A second signal, or a stop that
 * overruns the grace (a hung connection), ends the process at once. A fatal error (the
 * projection loop stopped) stops the backend the same way and exits 1.
 */
export async function serveUntilSignal(backend: Backend, opts: ServeOptions): Promise<void> {
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  const log = backend.ctx.log;
  const ended = await Promise.race([
    new Promise<NodeJS.Signals>((resolve) => {
      process.once('SIGTERM', () => resolve('SIGTERM'));
      process.once('SIGINT', () => resolve('SIGINT'));
    }),
    backend.fatal,
  ]);
  if (ended instanceof Error) {
    // Nothing this process serves can be trusted now: stop within the grace and exit
    // non-zero, so its supervisor starts it afresh (from the snapshot) and another leads.
    process.stderr.write(`sonar: ${ended.message}: exiting so that a fresh process takes over\n`);
    const overrun = setTimeout(() => exit(1), opts.graceMs + EXIT_MARGIN_MS);
    overrun.unref();
    await backend.stop().catch(() => {});
    exit(1);
    return;
  }
  const signal = ended;
  log.info('backend stopping', { signal, graceMs: opts.graceMs });
  const again = (): void => {
    log.warn('second signal: exiting now');
    exit(1);
  };
  process.once('SIGTERM', again);
  process.once('SIGINT', again);
  const overrun = setTimeout(() => {
    log.error('backend stop overran its grace: exiting now', { graceMs: opts.graceMs });
    exit(1);
  }, opts.graceMs + EXIT_MARGIN_MS);
  overrun.unref();
  await backend.stop();
  clearTimeout(overrun);
  process.off('SIGTERM', again);
  process.off('SIGINT', again);
  if (backend.stragglers.length === 0) return;
  log.warn('exiting with parts left running; their leases bring their work back', {
    stragglers: backend.stragglers,
  });
  // After the CLI has set its exit code; only a straggler's handles keep the loop alive.
  setTimeout(() => exit(typeof process.exitCode === 'number' ? process.exitCode : 0), 50).unref();
}
