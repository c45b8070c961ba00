import type { Command } from 'commander';
import { runDemo, summaryLines } from '../../dev/demo.js';
import { startDevStack } from '../../dev/dev-stack.js';
import type { DevStack } from '../../dev/dev-stack.js';
import { CommandFailed, isTty, paint } from '../../display/output.js';
import { describeSupervisorEvent, wholeNumber } from './workers.js';

interface DevFlags {
  demo?: boolean;
  fast?: boolean;
  port: string;
  workers: string;
  httpPort?: string;
  dir: string;
}

/** Ends once SIGINT or SIGTERM arrives. */
const untilSignal = (): Promise<NodeJS.Signals> =>
  new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });

function banner(stack: DevStack, color: boolean): string {
  const http =
    stack.config.httpPort !== undefined
      ? `\n  http     dashboard, /metrics, /healthz, /readyz: http://${stack.config.httpHost ?? '127.0.0.1'}:${stack.config.httpPort}/`
      : '';
  return [
    paint(color, 'green', `sonar dev: NATS at ${stack.url}`),
    `  backend  in this process (prefix ${stack.config.prefix}); logs in ${stack.logDir}`,
    `  workers  ${stack.supervisor
      .children()
      .map((c) => `${c.spec.tags.join(',')} (${c.spec.slots} slots)`)
      .join(', ')}; supervised: a dead worker is reported and respawned${http}`,
  ].join('\n');
}

/**
 * `sonar dev [--demo] [--fast] [--port N] [--workers N]`: the embedded default. A
 * local nats-server (state in `.sonar/`), the backend in this process, and local workers
 * under a supervisor. `--demo` runs the sample run with a live display and a worker killed
 * halfway, prints a summary and stops everything (exit 0 when the run succeeded). Without
 * it, everything keeps running for `sonar submit` until SIGINT or SIGTERM.
 */
export function registerDev(program: Command): void {
  program
    .command('dev')
    .summary('run the embedded default: a local nats-server, the backend and three workers')
    .description(
      'run the embedded default: a local `nats-server -js` (its state and logs under --dir), the backend in this process, and local workers under a supervisor (tags io,linux with 3 slots, linux with 2, linux,gpu with 1, in turn for more --workers). ' +
        'Without --demo it keeps running for your own runs until Ctrl-C (SIGINT) or SIGTERM, which drains the workers and stops the backend and the server. ' +
        'With --demo it submits a sample run, shows it live, SIGKILLs a worker halfway to show the recovery, prints a summary and stops: exit 0 when the run succeeded.',
    )
    .option('--demo', 'submit a sample run, show it live, kill a worker halfway, then stop')
    .option('--fast', 'short ticks, pulses and sleeps (CI)')
    .option('--port <n>', 'nats-server port on 127.0.0.1; 0 picks a free port', '4222')
    .option('--workers <n>', 'local worker processes', '3')
    .option('--http-port <n>', 'serve /metrics, /healthz, /readyz on this port (SONAR_HTTP_PORT)')
    .option('--dir <path>', 'where the server stores its state and logs go', '.sonar')
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  sonar dev --demo            the five-minute tour in one command (what `npm start` runs)\n' +
        '  sonar dev                   keep running; then `sonar submit run.json --wait` elsewhere\n' +
        '  sonar dev --port 0          a free port; the URL is printed (export SONAR_NATS_URL=...)\n',
    )
    .action(async (flags: DevFlags) => {
      const port = wholeNumber('--port', flags.port, 0);
      const workers = wholeNumber('--workers', flags.workers);
      const tty = isTty();
      let early: string[] | null = [];
      const stack = await startDevStack({
        dir: flags.dir,
        port,
        workers,
        fast: Boolean(flags.fast),
        overrides: { SONAR_HTTP_PORT: flags.httpPort },
        ...(!flags.demo && {
          onSupervisorEvent: (e) => {
            if (e.type === 'respawning') return;
            // Held back until the banner is out, so the first lines say where things are.
            if (early) early.push(describeSupervisorEvent(e));
            else process.stdout.write(`${describeSupervisorEvent(e)}\n`);
          },
        }),
      });
      // A signal during the demo stops it early; the stack is stopped either way.
      const signalled = untilSignal();
      try {
        process.stdout.write(`${banner(stack, tty)}\n`);
        for (const line of early ?? []) process.stdout.write(`${line}\n`);
        early = null;
        if (!flags.demo) {
          process.stdout.write(
            `ready: export SONAR_NATS_URL=${stack.url}; sonar submit RUN.json --wait (Ctrl-C stops)\n`,
          );
          await signalled;
          process.stdout.write('stopping: workers drain, then the backend and nats-server stop\n');
          return;
        }
        const summary = await Promise.race([
          runDemo({
            stack,
            fast: Boolean(flags.fast),
            tty,
            timeoutMs: flags.fast ? 45_000 : 180_000,
          }),
          signalled.then((s) => {
            throw new CommandFailed(`demo interrupted by ${s}`);
          }),
        ]);
        process.stdout.write(`${summaryLines(summary, tty).join('\n')}\n`);
        process.stdout.write('stopping workers, backend and nats-server...\n');
        if (summary.state !== 'Succeeded') {
          throw new CommandFailed(`the demo run ended ${summary.state}; see ${stack.logDir}`);
        }
      } finally {
        await stack.stop();
      }
    });
}
