import type { Command } from 'commander';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { assertId } from '../../../actors/ids.js';
import { taskResultOf } from '../../client/client.js';
import type { TaskResult } from '../../client/client.js';
import { createOutputStore } from '../../storage/create-output-store.js';
import { createResultsSink } from '../../storage/create-results-sink.js';
import { resultKeyOf } from '../../storage/results-sink.js';
import type { StoredResult } from '../../storage/results-sink.js';
import { inlineOutput, readOutput } from '../../storage/result-reader.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { writeOut } from '../../display/output.js';

interface ResultsFlags extends ConnectionFlags {
  task?: string;
  json?: boolean;
}

/**
 * A result as `--json` prints it: the SDK's {@link TaskResult} (what `SonarClient.results()`
 * gives), and the output when it is at hand.
 */
export interface ResultView extends TaskResult {
  /** A `json` step's output, parsed. */
  json?: unknown;
  /** A `bytes` step's output, base64. */
  base64?: string;
}

const decoder = new TextDecoder();

function viewOf(r: StoredResult, output: Uint8Array | null): ResultView {
  const view: ResultView = taskResultOf(r);
  if (output === null) return view;
  if (r.kind === 'json') view.json = JSON.parse(decoder.decode(output)) as unknown;
  else view.base64 = Buffer.from(output).toString('base64');
  return view;
}

/** One line per task: step, task, size, and a preview of a small output. */
function listText(runId: string, results: StoredResult[]): string {
  if (results.length === 0) return `no results for run ${runId} yet\n`;
  const width = Math.max(...results.map((r) => `${r.stepId}.${r.taskId}`.length));
  const lines = results.map((r) => {
    const preview =
      r.json !== undefined
        ? JSON.stringify(r.json)
        : r.inline !== undefined
          ? Buffer.from(r.inline, 'base64').toString('utf8').replace(/\s+/g, ' ')
          : `(in the output store: ${r.outputRef})`;
    const cut = preview.length > 60 ? `${preview.slice(0, 57)}...` : preview;
    return `${`${r.stepId}.${r.taskId}`.padEnd(width)}  ${String(r.bytes).padStart(7)} B  ${cut}`;
  });
  return `${lines.join('\n')}\n${results.length} result(s); \`sonar results ${runId} --task ID\` prints one output\n`;
}

/**
 * `sonar results RUN [--task ID] [--json]` (DESIGN.md section 8): the results the finalizers
 * wrote to the `sonar_results` sink. A list shows each task's size and a preview; `--task`
 * prints that task's whole output to stdout (fetched from the output store when it is large).
 */
export function registerResults(program: Command): void {
  program
    .command('results')
    .summary('print the results of a run, or one task output')
    .description(
      "print the results the finalizers wrote to the results sink (the sonar_results bucket, or the PostgreSQL table when SONAR_RESULTS_URL is set): each task's size and a preview of its output. " +
        "With --task, that task's whole output on stdout, fetched from the output store when it is too large for the sink (over 16 KiB).",
    )
    .argument('<run>', 'run id')
    .option('--task <id>', "print this task's whole output (raw bytes; JSON with --json)")
    .option('--json', 'print JSON: {"runId","results":[...]} or one result with its output')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (runId: string, flags: ResultsFlags) => {
      assertId('run', runId);
      if (flags.task !== undefined) assertId('--task', flags.task);
      await withConnection(flags, async (ctx) => {
        // The configured sink: the PostgreSQL table with SONAR_RESULTS_URL, else the bucket.
        const sink = await createResultsSink(ctx.nc, ctx.config);
        try {
          if (flags.task === undefined) {
            const results = await sink.list(runId);
            await writeOut(
              flags.json
                ? `${JSON.stringify({ runId, results: results.map((r) => viewOf(r, inlineOutput(r))) }, null, 2)}\n`
                : listText(runId, results),
            );
            return;
          }
          const r = await sink.get(runId, flags.task);
          if (!r) {
            throw new SonarError(
              ErrorCode.NotFound,
              `no result for ${resultKeyOf(runId, flags.task)}: the task has not succeeded (sonar status --run ${runId})`,
              { runId, taskId: flags.task },
            );
          }
          const output = await readOutput(r, () => createOutputStore(ctx.nc, ctx.config));
          if (flags.json) await writeOut(`${JSON.stringify(viewOf(r, output), null, 2)}\n`);
          else await new Promise<void>((resolve) => process.stdout.write(output, () => resolve()));
        } finally {
          await sink.close?.();
        }
      });
    });
}
