import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import { SonarClient } from '../../client/client.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';

/** `sonar cancel RUN [--task ID] [--reason TEXT]` (DESIGN.md section 8). */
export function registerCancel(program: Command): void {
  program
    .command('cancel')
    .summary('cancel a run, or one task of it')
    .description(
      'cancel a run (its open tasks are cancelled and its unfinished steps skipped), or with --task one task of it',
    )
    .argument('<run>', 'run id')
    .option('--task <id>', 'cancel only this task')
    .option('--reason <text>', 'recorded in the events', 'cancelled by operator')
    .option('--json', 'print JSON')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(
      async (
        run: string,
        opts: ConnectionFlags & { task?: string; reason: string; json?: boolean },
      ) => {
        assertId('run', run);
        if (opts.task !== undefined) assertId('--task', opts.task);
        await withConnection(opts, async ({ nc, config }) => {
          const client = new SonarClient(nc, { prefix: config.prefix });
          const r = await client.cancel(run, {
            reason: opts.reason,
            ...(opts.task !== undefined && { taskId: opts.task }),
          });
          process.stdout.write(
            opts.json
              ? `${JSON.stringify(r)}\n`
              : `cancelled ${opts.task !== undefined ? `task ${run}.${opts.task}` : `run ${run}`}: ${r.cancelled} task(s)\n`,
          );
        });
      },
    );
}
