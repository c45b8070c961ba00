import type { Command } from 'commander';
import { summaryOf } from '../../backend/sweep/index.js';
import type { SweepReport } from '../../backend/sweep/index.js';
import { writeOut } from '../../display/output.js';
import { operatorRequest } from '../operator-request.js';
import type { ConnectionFlags } from '../context.js';

interface SweepFlags extends ConnectionFlags {
  json?: boolean;
}

function reportText(r: SweepReport): string {
  const s = summaryOf(r);
  const lines = [
    `workers lost            ${s['workersLost']}`,
    `dispatch messages       ${s['dispatchPurged']} purged of ${s['dispatchChecked']}`,
    `finalizations requeued  ${s['finalizationsReenqueued']}`,
    `stuck jobs              ${s['jobsStuck']}: ${s['jobsPoisoned']} poisoned, ${s['jobsDropped']} dropped, ${s['jobsUnidentified']} unidentified`,
    `consumers deleted       ${r.orphanConsumers.deleted.join(', ') || '0'}`,
    `runs purged             ${s['runsPurged']} of ${s['runsExpired']} expired${r.retention.skipped ? ` (skipped: ${r.retention.skipped})` : ''}`,
    `evicted                 ${s['runsEvicted']} runs, ${s['workersEvicted']} workers`,
    ...r.failed.map((f) => `FAILED ${f.repair}: ${f.error}`),
    `swept in ${r.ms} ms by ${r.by}`,
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * `sonar sweep [--json]` (DESIGN.md section 8): one full sweep now, by hand, without claiming
 * the fleet's turn. A backend runs it (`sonar.api.sweep`); the CLI shows each repair as it
 * begins, on stderr, and prints the report. Exit 1 when a repair failed.
 */
export function registerSweep(program: Command): void {
  program
    .command('sweep')
    .summary('run one full sweep now on a backend')
    .description(
      'run one full sweep now on a backend, as the backends do every SONAR_FULL_SWEEP: stale dispatches, lost and stuck finalization jobs, orphaned tasks, retention. ' +
        'Each repair is shown on stderr as it begins, then the report is printed; exit 1 when a repair failed. Needs a backend of this version (sonar.api.sweep).',
    )
    .option('--json', 'print the report as JSON')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (flags: SweepFlags) => {
      let shown = '';
      const report = await operatorRequest(flags, (api) =>
        api.follow<'sweep', SweepReport>(
          'sweep',
          {},
          {
            onProgress: (p) => {
              const { repair, done, of } = p;
              if (typeof repair !== 'string' || repair === shown || repair === 'open') return;
              shown = repair;
              process.stderr.write(`sweep: ${repair} (${Number(done) + 1} of ${String(of)})\n`);
            },
          },
        ),
      );
      await writeOut(flags.json ? `${JSON.stringify(report, null, 2)}\n` : reportText(report));
      if (report.failed.length > 0) process.exitCode = 1;
    });
}
