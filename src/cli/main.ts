import { Command, CommanderError } from 'commander';
import { registerBackend } from './commands/backend.js';
import { registerCancel } from './commands/cancel.js';
import { registerExport } from './commands/export.js';
import { registerPlan } from './commands/plan.js';
import { registerPoisoned } from './commands/poisoned.js';
import { registerReplay } from './commands/replay.js';
import { registerSubmit } from './commands/submit.js';
import { registerTail } from './commands/tail.js';
import { registerWorker } from './commands/worker.js';
import { registerDev } from './commands/dev.js';
import { registerRerun } from './commands/rerun.js';
import { registerLogs } from './commands/logs.js';
import { registerResults } from './commands/results.js';
import { registerRevoke } from './commands/revoke.js';
import { registerStatus } from './commands/status.js';
import { registerWorkers } from './commands/workers.js';
import { registerSweep } from './commands/sweep.js';
import { registerCreds } from './commands/creds.js';
import { HELP_FOOTER } from './help.js';
import { reportError } from '../display/output.js';
import { packageVersion } from '../package-info.js';

/** `sonar <verb>` (DESIGN.md section 8): one file per verb under commands/. */
export function buildProgram(): Command {
  const program = new Command('sonar')
    .description('Sonar: tasks for fleets of disposable workers, on NATS JetStream')
    .version(packageVersion(), '-V, --version', 'print the version and exit')
    .showHelpAfterError()
    .exitOverride();
  registerReplay(program);
  registerExport(program);
  registerTail(program);
  registerPoisoned(program);
  registerBackend(program);
  registerWorker(program);
  registerSubmit(program);
  registerCancel(program);
  registerRevoke(program);
  registerPlan(program);
  registerDev(program);
  registerWorkers(program);
  registerStatus(program);
  registerResults(program);
  registerLogs(program);
  registerRerun(program);
  registerSweep(program);
  registerCreds(program);
  program.addHelpText('after', HELP_FOOTER);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err: unknown) {
    if (err instanceof CommanderError) {
      // --help and --version end here with exit code 0; usage mistakes exit 2.
      return err.exitCode === 0 ? 0 : 2;
    }
    return reportError(err, argv.includes('--json'));
  }
}

/**
 * How long a finished verb may take to exit by itself. Past it, something a library left
 * open (a connection still redialling with a refused credential, a timer) would keep a
 * failed worker alive with nothing to do, and its supervisor would never see it end.
 */
const EXIT_GRACE_MS = 15_000;

process.exitCode = await main(process.argv);
setTimeout(() => {
  process.stderr.write(
    `sonar: still open ${EXIT_GRACE_MS} ms after the end: ${process.getActiveResourcesInfo().join(', ')}; exiting\n`,
  );
  process.exit();
}, EXIT_GRACE_MS).unref();
