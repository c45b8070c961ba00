import { CommanderError } from 'commander';
import { buildProgram } from './program.js';
import { reportError } from '../display/output.js';
import { processEnvironment } from '../config.js';
import { createLogger } from '../log.js';
import { startTracing, tracesExportersOf } from '../tracing/sdk.js';

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  let tracing;
  try {
    // Nothing is loaded, and no logger made, unless OTEL_TRACES_EXPORTER asks for traces.
    const env = processEnvironment.tracing();
    if (tracesExportersOf(env).length > 0) {
      tracing = await startTracing(env, argv[2] ?? 'sonar', createLogger({ component: 'tracing' }));
    }
    await program.parseAsync(argv);
    return 0;
  } catch (err: unknown) {
    if (err instanceof CommanderError) {
      // --help and --version end here with exit code 0; usage mistakes exit 2.
      return err.exitCode === 0 ? 0 : 2;
    }
    return reportError(err, argv.includes('--json'));
  } finally {
    await tracing?.shutdown();
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
