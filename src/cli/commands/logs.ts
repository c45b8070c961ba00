import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import { SonarClient } from '../../client/client.js';
import { isTty, UsageError, writeOut } from '../../display/output.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';

/**
 * A log as a terminal may show it: a task's output could carry escape sequences that move
 * the cursor, retitle the window or worse, so control characters but newline, tab and
 * carriage return are shown as `?` on a terminal (a pipe gets the bytes as stored).
 */
const printable = (text: string): string =>
  // eslint-disable-next-line no-control-regex
  text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g, '?');

interface LogsFlags extends ConnectionFlags {
  attempt?: string;
  follow?: boolean;
  json?: boolean;
}

/**
 * `sonar logs RUN TASK [--attempt N] [--follow] [--json]`: what one attempt of a task wrote
 * to stdout and stderr (the latest attempt unless told), both printed to stdout in the order
 * written, as the logs stream keeps them: the
 * newest part of each attempt's log, for `SONAR_RETENTION`. `--follow` goes on while the
 * attempt runs; Ctrl-C stops it.
 */
export function registerLogs(program: Command): void {
  program
    .command('logs')
    .summary("print a task attempt's log; --follow streams a running one")
    .description(
      "print what one attempt of a task wrote to its log (ctx.log() of a handler, a command's stderr; a command's stdout is its output, see sonar results), the latest attempt unless --attempt says, to stdout in the order written. " +
        'Each attempt keeps its newest 128 chunks (up to 4 MiB) for SONAR_RETENTION, within SONAR_LOGS_MAX_BYTES in all; a gap the worker left is shown as [sonar: N bytes not kept]. ' +
        'With --follow it waits for the first attempt of a task not yet published and goes on while the attempt runs; Ctrl-C stops it.',
    )
    .argument('<run>', 'run id')
    .argument('<task>', 'task id')
    .option('--attempt <n>', 'which attempt (1 = the first publish; default: the latest)')
    .option('-f, --follow', 'keep printing while the attempt runs')
    .option('--json', 'one JSON line per piece: {"attempt","seq","stream","text","dropped","at"}')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (runId: string, taskId: string, flags: LogsFlags) => {
      assertId('run', runId);
      assertId('task', taskId);
      const attempt = flags.attempt === undefined ? undefined : Number(flags.attempt);
      if (attempt !== undefined && (!Number.isInteger(attempt) || attempt < 1)) {
        throw new UsageError(
          `--attempt: ${JSON.stringify(flags.attempt)} is not a whole number >= 1`,
        );
      }
      const tty = isTty();
      const ac = new AbortController();
      const stop = (): void => ac.abort();
      process.once('SIGINT', stop);
      try {
        await withConnection(
          flags,
          async (ctx) => {
            const client = new SonarClient(ctx.nc, { prefix: ctx.config.prefix });
            const chunks = client.logs(runId, taskId, {
              ...(attempt !== undefined && { attempt }),
              follow: flags.follow === true,
              signal: ac.signal,
            });
            for await (const c of chunks) {
              if (flags.json) {
                const { attempt: a, seq, stream, text, dropped, at } = c;
                await writeOut(
                  `${JSON.stringify({ attempt: a, seq, stream, text, dropped, at })}\n`,
                );
                continue;
              }
              // Both streams go to stdout, in the order written, as `kubectl logs` does: a
              // pipe sees the whole log.
              const gap = c.dropped > 0 ? `[sonar: ${c.dropped} bytes not kept]\n` : '';
              const text = tty ? printable(c.text) : c.text;
              if (gap !== '' || text !== '') await writeOut(gap + text);
            }
          },
          flags.follow ? 'long-lived' : 'one-shot',
        );
      } finally {
        process.removeListener('SIGINT', stop);
      }
    });
}
