import { Command } from 'commander';
import { registerBackend } from './commands/backend.js';
import { registerCancel } from './commands/cancel.js';
import { registerCreds } from './commands/creds.js';
import { registerDev } from './commands/dev.js';
import { registerExport } from './commands/export.js';
import { registerPlan } from './commands/plan.js';
import { registerPoisoned } from './commands/poisoned.js';
import { registerReplay } from './commands/replay.js';
import { registerSchedule } from './commands/schedule.js';
import { registerRerun } from './commands/rerun.js';
import { registerLogs } from './commands/logs.js';
import { registerResults } from './commands/results.js';
import { registerRevoke } from './commands/revoke.js';
import { registerStatus } from './commands/status.js';
import { registerSubmit } from './commands/submit.js';
import { registerSweep } from './commands/sweep.js';
import { registerTail } from './commands/tail.js';
import { registerWorker } from './commands/worker.js';
import { registerWorkers } from './commands/workers.js';
import { HELP_FOOTER } from './help.js';
import { packageVersion } from '../package-info.js';

/**
 * `sonar <verb>` (DESIGN.md section 8): one file per verb under commands/. A module of its own,
 * apart from main.ts (which runs the CLI when loaded), so that the reference in
 * docs/cli-reference.md can be rendered from the very program `sonar` runs.
 *
 * Verbs are registered in the order `sonar --help` and the reference list them: running
 * Sonar, then runs, then operators' tools, then the offline ones.
 */
export function buildProgram(): Command {
  const program = new Command('sonar')
    .description('Sonar: tasks for fleets of disposable workers, on NATS JetStream')
    .version(packageVersion(), '-V, --version', 'print the version and exit')
    .showHelpAfterError()
    .exitOverride();
  registerDev(program);
  registerBackend(program);
  registerWorker(program);
  registerWorkers(program);
  registerSubmit(program);
  registerStatus(program);
  registerResults(program);
  registerLogs(program);
  registerTail(program);
  registerCancel(program);
  registerRerun(program);
  registerPoisoned(program);
  registerSchedule(program);
  registerSweep(program);
  registerRevoke(program);
  registerCreds(program);
  registerExport(program);
  registerReplay(program);
  registerPlan(program);
  program.addHelpText('after', HELP_FOOTER);
  return program;
}
