import type { Command } from 'commander';
import { loadProcessConfig } from '../../config.js';
import { createLogger } from '../../log.js';
import { DEFAULT_MAX_PAYLOAD, maxSlotsFor } from '../../pulse-size.js';
import { formatCommandPolicy } from '../../worker/command-policy.js';
import { NonRetryableError } from '../../worker/errors.js';
import type { TaskHandler } from '../../worker/options.js';
import { runCommand } from '../../worker/task-runner.js';
import { createWorker } from '../../worker/worker.js';
import { UsageError } from '../../display/output.js';
import { configHelp } from '../config-help.js';
import { context } from '@opentelemetry/api';
import { traceparentOf } from '../../tracing/traceparent.js';

interface WorkerFlags {
  tags: string;
  slots: string;
  spot?: boolean;
  server?: string;
  prefix?: string;
  workerId?: string;
  drainGrace?: string;
  spotMargin?: string;
  imdsUrl?: string;
  maxOutput?: string;
  commands?: string;
}

/**
 * `sonar worker --tags a,b --slots N [--spot] [-- CMD ARGS...]` (DESIGN.md sections 6 and 8).
 * With `-- CMD` every task runs that command; without it, each task's own `command`.
 * `--commands` (`SONAR_WORKER_COMMANDS`) limits which task commands are accepted: `any`,
 * `none` or an allow-list; a task whose command is refused fails for good, and nothing runs.
 * SIGTERM or SIGINT drains (a second one releases at once); so does the death of the
 * supervisor that started it (`sonar workers`: its IPC channel closes). Exit 0 once drained,
 * 1 when the worker failed (e.g. the backend answered `conflict`: this worker was declared Lost).
 */
/** A progress line's value: its JSON when it is JSON (`0.5`, `{"done":3}`), else its text. */
function progressValueOf(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return line.slice(0, 512);
  }
}

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .summary('run a worker: pull tasks for its tags and run them')
    .description(
      'run a worker: pull tasks for its tags and run them, each as a command (argv, no shell): with `-- CMD ARGS...` every task runs that command, without it each task runs its own `command`. ' +
        "The task input is written to the command's stdin as JSON, and its stdout is the output; exit 0 succeeds, any other exit fails the attempt (retried up to the task's maxAttempts). " +
        'The command gets SONAR_RUN_ID, SONAR_TASK_ID and SONAR_ATTEMPT_ID in its environment, and TRACEPARENT when the attempt is traced (docs/tracing.md). ' +
        'SIGTERM or SIGINT drains (running tasks finish within the drain grace; a second signal releases them at once); exit 0 once drained, 1 when the worker failed (e.g. it was declared Lost).',
    )
    .requiredOption('--tags <tags>', 'comma-separated routing tags, e.g. linux,gpu')
    .option(
      '--slots <n>',
      `tasks at once, across all tags (at most ${maxSlotsFor(DEFAULT_MAX_PAYLOAD)}: a pulse lists them all)`,
      '1',
    )
    .option('--spot', 'watch for spot interruption notices (default: when IMDS answers)')
    .option('--no-spot', 'never watch for spot notices')
    .option('--worker-id <id>', 'worker id (default: <host>-<nuid>); used once')
    .option('--drain-grace <duration>', configHelp('SONAR_DRAIN_GRACE'))
    .option('--spot-margin <duration>', configHelp('SONAR_SPOT_MARGIN'))
    .option('--imds-url <url>', configHelp('SONAR_IMDS_URL'))
    .option('--max-output <size>', configHelp('SONAR_MAX_OUTPUT'))
    .option(
      '--commands <policy>',
      'task commands accepted: any, none, or a comma-separated list of absolute paths or names (SONAR_WORKER_COMMANDS, default any)',
    )
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .argument('[command...]', 'after `--`: the command to run for every task (argv, no shell)')
    .action(async (command: string[], flags: WorkerFlags) => {
      const slots = Number(flags.slots);
      if (!Number.isInteger(slots) || slots < 1) {
        throw new UsageError(`--slots: ${JSON.stringify(flags.slots)} is not a whole number >= 1`);
      }
      const tags = flags.tags
        .split(',')
        .map((t) => t.trim())
        .filter((t) => t !== '');
      const config = loadProcessConfig({
        SONAR_NATS_URL: flags.server,
        SONAR_PREFIX: flags.prefix,
        SONAR_DRAIN_GRACE: flags.drainGrace,
        SONAR_SPOT_MARGIN: flags.spotMargin,
        SONAR_IMDS_URL: flags.imdsUrl,
        SONAR_MAX_OUTPUT: flags.maxOutput,
        SONAR_WORKER_COMMANDS: flags.commands,
      });
      const log = createLogger({ level: config.logLevel });
      const fixed = command.length > 0 ? command : null;
      if (fixed === null && config.workerCommands.kind === 'none') {
        throw new UsageError(
          'SONAR_WORKER_COMMANDS (--commands) is none but no `-- CMD` was given: this worker could run no task',
        );
      }
      const handler: TaskHandler = (input, t) => {
        const argv = fixed ?? t.command;
        if (!argv) {
          throw new NonRetryableError(
            'the task has no command and this worker was started without `-- CMD`',
          );
        }
        // The handler runs in the attempt span's context: a traced command continues it
        // (OpenTelemetry's environment carrier, `TRACEPARENT`).
        const traceparent = traceparentOf(context.active());
        return runCommand(argv, {
          input,
          env: {
            SONAR_RUN_ID: t.runId,
            SONAR_TASK_ID: t.taskId,
            SONAR_ATTEMPT_ID: t.attemptId,
            ...(traceparent !== undefined && { TRACEPARENT: traceparent }),
          },
          signal: t.signal,
          maxOutputBytes: config.maxOutputBytes,
          onStderr: (text) => t.log(text),
          onProgress: (line) => {
            try {
              t.progress(progressValueOf(line));
            } catch {
              // A value over the size limit is no progress: the line stays in the log only.
            }
          },
        });
      };
      const worker = createWorker({
        tags,
        slots,
        handler,
        commands: formatCommandPolicy(config.workerCommands),
        connection: config,
        prefix: config.prefix,
        ...(flags.workerId !== undefined && { workerId: flags.workerId }),
        drainGraceMs: config.drainGraceMs,
        stopGraceMs: config.stopGraceMs,
        spot: flags.spot ?? 'auto',
        imdsUrl: config.imdsUrl,
        spotMarginMs: config.spotMarginMs,
        maxOutputBytes: config.maxOutputBytes,
        ...(config.s3 && { s3: config.s3 }),
        log,
      });
      // SIGTERM and SIGINT drain it (run()). Started by `sonar workers`
      // (src/dev/supervisor.ts), which gives every child an IPC channel: the channel closes
      // when the supervisor dies, even by SIGKILL. Drain then too: a worker nobody supervises
      // would run on with nobody to report it.
      const onSupervisorGone = (): void => {
        log.warn('supervisor gone: draining', { pid: process.pid, ppid: process.ppid });
        worker.drain('shutdown').catch(() => {});
      };
      const supervised = typeof process.send === 'function';
      // A 'disconnect' listener keeps the channel referenced: removed below, so a drained
      // worker still exits while its supervisor lives.
      if (supervised) process.on('disconnect', onSupervisorGone);
      try {
        await worker.run();
      } finally {
        process.off('disconnect', onSupervisorGone);
      }
    });
}
