import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import type { Command } from 'commander';
import { ErrorCode, SonarError, ValidationError } from '../../../actors/errors.js';
import { SonarClient } from '../../client/client.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { UsageError } from '../output.js';

const TERMINAL_RUN_STATES = new Set(['Succeeded', 'Failed', 'Cancelled']);

/**
 * `sonar submit RUN.json [--wait]` (DESIGN.md section 8): validates the run file (every
 * problem listed, exit 2, nothing sent), submits it in chunks, prints `{runId, taskCount}`.
 * With `--wait`, follows the run until it ends: exit 0 when it succeeded, 1 otherwise.
 */
export function registerSubmit(program: Command): void {
  program
    .command('submit')
    .description('submit a run file')
    .argument('<file>', 'run file (JSON); `-` reads stdin')
    .option('--wait', 'wait until the run ends; exit 1 unless it succeeded')
    .option('--json', 'print JSON')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (file: string, opts: ConnectionFlags & { wait?: boolean; json?: boolean }) => {
      const runFile = parseRunFile(file, await readText(file));
      await withConnection(opts, async ({ nc, config }) => {
        const client = new SonarClient(nc, {
          prefix: config.prefix,
          maxInputBytes: config.maxInputBytes,
        });
        const submitted = await client.submit(runFile);
        process.stdout.write(
          opts.json
            ? `${JSON.stringify(submitted)}\n`
            : `submitted run ${submitted.runId}: ${submitted.taskCount} tasks\n`,
        );
        if (!opts.wait) return;
        for (;;) {
          const status = await client.status(submitted.runId);
          if (status.state !== null && TERMINAL_RUN_STATES.has(status.state)) {
            if (opts.json) process.stdout.write(`${JSON.stringify(status)}\n`);
            else process.stdout.write(`run ${status.runId} ${status.state}\n`);
            if (status.state !== 'Succeeded') {
              throw new SonarError(
                ErrorCode.IllegalTransition,
                `run ${status.runId} ended ${status.state}`,
                { runId: status.runId, state: status.state },
              );
            }
            return;
          }
          await delay(1_000);
        }
      });
    });
}

async function readText(file: string): Promise<string> {
  try {
    if (file !== '-') return await readFile(file, 'utf8');
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  } catch (err: unknown) {
    throw new UsageError(
      `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
}

function parseRunFile(file: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ValidationError(`${file} is not JSON: ${why}`, [{ path: '(root)', message: why }]);
  }
}
