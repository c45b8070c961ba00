import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import { SonarClient } from '../../client/client.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { UsageError, writeOut } from '../../display/output.js';
import { rerunFile } from '../rerun-file.js';
import { readRun } from '../read-run.js';

interface RerunFlags extends ConnectionFlags {
  failed?: boolean;
  as?: string;
  json?: boolean;
  dryRun?: boolean;
}

/**
 * `sonar rerun RUN --failed --as NEWRUN` (DESIGN.md section 8): submits a new run made of
 * the tasks of RUN that did not succeed, with the same steps, commands and inputs. Follow it
 * with `sonar status --run NEWRUN` or `sonar tail --run NEWRUN`.
 */
export function registerRerun(program: Command): void {
  program
    .command('rerun')
    .summary('submit a new run of the tasks of a finished run that did not succeed')
    .description(
      "submit a new run of the tasks of a finished run that did not succeed (Failed, Dead, Cancelled, Poisoned, or never run because their step was skipped), with the same steps, commands and inputs; a step left with no task is dropped, and from the others' `after`. " +
        'Refused while the run still runs, and when every task succeeded.',
    )
    .argument('<run>', 'the finished run')
    .option('--failed', 'take the tasks that did not succeed (required: the only mode)')
    .requiredOption('--as <newRun>', 'id of the new run')
    .option('--dry-run', 'print the new run file instead of submitting it')
    .option('--json', 'print JSON')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (runId: string, flags: RerunFlags) => {
      assertId('run', runId);
      assertId('--as', flags.as!);
      if (!flags.failed)
        throw new UsageError('rerun needs --failed (the tasks that did not succeed)');
      await withConnection(flags, async (ctx) => {
        const { projection } = await readRun(ctx, runId);
        const file = rerunFile(projection, runId, flags.as!);
        const count = file.steps.reduce((n, s) => n + s.tasks.length, 0);
        if (flags.dryRun) {
          await writeOut(`${JSON.stringify(file, null, 2)}\n`);
          return;
        }
        const client = new SonarClient(ctx.nc, {
          prefix: ctx.config.prefix,
          maxInputBytes: ctx.config.maxInputBytes,
        });
        const submitted = await client.submit(file);
        await writeOut(
          flags.json
            ? `${JSON.stringify({ ...submitted, from: runId })}\n`
            : `submitted run ${submitted.runId}: ${count} task(s) of ${runId} that did not succeed\n`,
        );
      });
    });
}
