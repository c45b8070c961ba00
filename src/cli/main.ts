import { Command, CommanderError } from 'commander';
import { registerExport } from './commands/export.js';
import { registerReplay } from './commands/replay.js';
import { registerTail } from './commands/tail.js';
import { reportError } from './output.js';

/** `sonar <verb>` (DESIGN.md section 8): one file per verb under commands/. */
export function buildProgram(): Command {
  const program = new Command('sonar')
    .description('Sonar: tasks for fleets of disposable workers, on NATS JetStream')
    .showHelpAfterError()
    .exitOverride();
  registerReplay(program);
  registerExport(program);
  registerTail(program);
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

process.exitCode = await main(process.argv);
