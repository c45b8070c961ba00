import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import type { Command } from 'commander';
import type { RunFile } from '../../protocol.js';
import { ValidationError } from '../../../actors/errors.js';
import type { Projection } from '../../../actors/projection.js';
import { isTerminalRunState } from '../../../actors/run/run.machine.js';
import { EventStore } from '../../../streams/event-store.js';
import { ProjectionLoop } from '../../backend/projection/index.js';
import { tasksByState } from '../../backend/storage/index.js';
import { SonarClient } from '../../client/client.js';
import type { TaskProgress } from '../../client/client.js';
import { silentLogger } from '../../log.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { LiveDisplay } from '../../display/live-display.js';
import { CommandFailed, isTty, paint, UsageError, writeOut } from '../../display/output.js';
import { failureLines, runFailures } from '../run-failures.js';
import {
  progressLines,
  RateTracker,
  shortDuration,
  stepProgress,
} from '../../display/run-progress.js';

interface SubmitFlags extends ConnectionFlags {
  wait?: boolean;
  json?: boolean;
}

/** Running tasks whose reported progress `submit --wait` shows under the bars. */
const SHOWN_TASK_PROGRESS = 5;
/** How often `submit --wait` reads the progress its running tasks reported. */
const PROGRESS_READ_MS = 2_000;

/** The latest progress of the run's running tasks, read every PROGRESS_READ_MS. */
class ReportedProgress {
  private latest = new Map<string, TaskProgress>();
  private readAt = -Infinity;
  private reading = false;

  constructor(
    private readonly client: SonarClient,
    private readonly runId: string,
  ) {}

  /** `  t3  {"done":40,"total":100}` per running task of its current attempt. */
  lines(p: Projection): string[] {
    if (!this.reading && performance.now() - this.readAt >= PROGRESS_READ_MS) {
      this.reading = true;
      this.readAt = performance.now();
      const running: string[] = [];
      for (const key of p.tasksByState.Running) {
        if (running.length === SHOWN_TASK_PROGRESS * 4) break;
        if (key.startsWith(`${this.runId}.`)) running.push(key.slice(this.runId.length + 1));
      }
      void this.client
        .progress(this.runId, running)
        .then((m) => (this.latest = m))
        .catch(() => undefined)
        .finally(() => (this.reading = false));
    }
    const out: string[] = [];
    for (const [taskId, r] of this.latest) {
      const task = p.tasks.get(`${this.runId}.${taskId}`)?.snapshot;
      if (task?.value !== 'Running' || task.context.attempt !== r.attempt) continue;
      if (out.length === SHOWN_TASK_PROGRESS) break;
      out.push(`  ${taskId}  ${JSON.stringify(r.value)}`);
    }
    return out;
  }
}

/**
 * Follows the run in the projection (which follows the event stream) until it ends, drawing
 * a progress bar per step: done/total, rate, ETA. Redrawn in place on a terminal, plain lines
 * every few seconds when piped, nothing with `--json`.
 */
async function watchRun(
  p: Projection,
  runId: string,
  json: boolean,
  client: SonarClient,
): Promise<string> {
  const tty = isTty();
  const display = json ? null : new LiveDisplay({ tty });
  const rates = new RateTracker();
  const started = performance.now();
  const reported = json ? null : new ReportedProgress(client, runId);
  for (;;) {
    const state = p.runs.get(runId)?.snapshot.value;
    display?.update([
      `run ${runId}: ${state ?? 'submitting'}  ${paint(tty, 'dim', shortDuration(performance.now() - started))}`,
      ...progressLines(stepProgress(p, runId), rates, tty),
      ...(reported?.lines(p) ?? []),
    ]);
    if (state !== undefined && isTerminalRunState(state)) {
      display?.finish();
      return state;
    }
    await delay(tty ? 200 : 500);
  }
}

/**
 * `sonar submit RUN.json [--wait]` (DESIGN.md section 8): validates the run file (every
 * problem listed, exit 2, nothing sent), submits it in chunks, prints `{runId, taskCount}`.
 * With `--wait` it follows the run's events until the run ends, with a progress bar per step;
 * exit 0 when the run succeeded, 1 otherwise, after listing what failed and why.
 */
export function registerSubmit(program: Command): void {
  program
    .command('submit')
    .summary('submit a run file; with --wait, follow it to its end')
    .description(
      'submit a run file: checked whole first (every problem listed, exit 2, nothing sent), then sent in chunks; prints the run id and its task count. ' +
        'Submitting the same file again is the same run (it completes a submit cut short); another file under the same runId is refused. ' +
        'With --wait it shows a progress bar per step (done/total, rate, ETA) until the run ends, then exits 0 when the run succeeded and 1 when it failed, listing each task that did not succeed with its exit code and error.',
    )
    .argument('<file>', 'run file (JSON); `-` reads stdin')
    .option('--wait', 'show progress until the run ends; exit 0 if it succeeded, 1 otherwise')
    .option('--json', 'print JSON: the submit answer, and with --wait the final state')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .addHelpText(
      'after',
      '\nRun file: {"runId":"scan-42","steps":[{"id":"crawl","tags":["linux"],"maxConcurrent":10,\n' +
        '  "after":[],"output":"json","timeoutMs":600000,"tasks":[{"id":"t1",\n' +
        '  "command":["sh","-c","echo hi"],"input":{},"maxAttempts":3}]}]}\n' +
        'Exit codes: 0 submitted (with --wait: succeeded), 1 failed or unreachable, 2 bad file.',
    )
    .action(async (file: string, opts: SubmitFlags) => {
      const runFile = parseRunFile(file, await readText(file));
      await withConnection(
        opts,
        async ({ nc, config, names }) => {
          const client = new SonarClient(nc, {
            prefix: config.prefix,
            maxInputBytes: config.maxInputBytes,
          });
          const store = new EventStore(nc, names);
          // Following starts before the submit, so no event of the run is missed.
          const loop = opts.wait ? new ProjectionLoop(store, silentLogger) : null;
          await loop?.start();
          try {
            // Parsed JSON, validated whole by submit before anything is sent.
            const submitted = await client.submit(runFile as RunFile);
            await writeOut(
              opts.json
                ? `${JSON.stringify(submitted)}\n`
                : `submitted run ${submitted.runId}: ${submitted.taskCount} tasks\n`,
            );
            if (!loop) return;
            const { runId } = submitted;
            const p = loop.projection;
            const state = await watchRun(p, runId, Boolean(opts.json), client);
            const report = await runFailures(p, store, runId);
            const run = p.runs.get(runId)!.snapshot;
            if (opts.json) {
              await writeOut(
                `${JSON.stringify({
                  runId,
                  state,
                  reason: run.context.reason,
                  taskCount: run.context.taskCount,
                  steps: Object.fromEntries(
                    stepProgress(p, runId).map((st) => [st.stepId, st.state]),
                  ),
                  tasks: tasksByState(p, runId),
                  failures: report.failures,
                })}\n`,
              );
            } else {
              const color = isTty();
              const head = `run ${runId} ${state}${run.context.reason ? `: ${run.context.reason}` : ''}`;
              await writeOut(
                `${[paint(color, state === 'Succeeded' ? 'green' : 'red', head), ...failureLines(runId, report, color)].join('\n')}\n`,
              );
            }
            if (state !== 'Succeeded') {
              throw new CommandFailed(
                `run ${runId} ended ${state}${run.context.reason ? ` (${run.context.reason})` : ''}`,
              );
            }
          } finally {
            await loop?.stop();
          }
        },
        opts.wait ? 'long-lived' : 'one-shot',
      );
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
