import type { Command } from 'commander';
import { assertId, isId } from '../../../actors/ids.js';
import type {
  CancelOutcome,
  PoisonedDetail,
  PoisonedTask,
  RetryOutcome,
} from '../../backend/finalize/index.js';
import { operatorName, withOperatorOptions } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { UsageError, isTty, paint, writeOut } from '../../display/output.js';
import { operatorRequest } from '../operator-request.js';

interface Flags extends ConnectionFlags {
  json?: boolean;
}

/** `RUN.TASK` -> the task key, refused (exit 2) unless both ids are valid. */
export function parseTaskRef(ref: string): string {
  const parts = ref.split('.');
  if (parts.length !== 2 || !parts.every(isId)) {
    throw new UsageError(
      `task must be RUN.TASK (ids of [A-Za-z0-9_-]{1,64}), got ${JSON.stringify(ref)}`,
    );
  }
  return ref;
}

/** `RUN.TASK` as the request's ids. */
function idsOf(ref: string): { runId: string; taskId: string } {
  const [runId, taskId] = parseTaskRef(ref).split('.') as [string, string];
  return { runId, taskId };
}

const json = (value: unknown): Promise<void> => writeOut(`${JSON.stringify(value, null, 2)}\n`);

function listText(rows: PoisonedTask[]): string {
  if (rows.length === 0) return 'no poisoned tasks\n';
  const color = isTty();
  const width = Math.max(...rows.map((r) => r.task.length));
  const lines = rows.map(
    (r) =>
      `${r.task.padEnd(width)}  attempt ${r.attemptId}  round ${r.round}  ${paint(color, 'red', r.error ?? '')}`,
  );
  return `${lines.join('\n')}\n${rows.length} poisoned\n`;
}

function showText(d: PoisonedDetail): string {
  const lines = [
    `task:     ${d.task} (${d.state})`,
    `step:     ${d.runId}.${d.stepId}`,
    `attempt:  ${d.attemptId}  (operator retries: ${d.round})`,
    `output:   ${d.outputRef ?? '-'}${d.outputBytes === null ? '' : ` (${d.outputBytes} bytes)`}`,
    `error:    ${d.error ?? '-'}`,
    `errors (${d.errors.length}):`,
    ...d.errors.map(
      (e) =>
        `  ${e.at}  round ${e.round} delivery ${e.delivery}${e.permanent ? ' permanent' : ''}  ${e.error}`,
    ),
  ];
  if (d.poison)
    lines.push(
      `poisoned: ${d.poison.poisonedAt} by ${d.poison.by} after ${d.poison.deliveries} deliveries`,
    );
  return `${lines.join('\n')}\n`;
}

/** `sonar poisoned list|show|retry|cancel` (DESIGN.md section 8); tasks named `RUN.TASK`. */
export function registerPoisoned(program: Command): void {
  const cmd = program
    .command('poisoned')
    .summary('inspect, retry or cancel tasks whose finalization was poisoned')
    .description(
      'inspect, retry or cancel tasks whose finalization was poisoned: it failed for good (a permanent error, or SONAR_FINALIZE_MAX_DELIVER deliveries of its job; the errors are in sonar_finalize_errors), and the task holds its step until an operator settles it. ' +
        'Tasks are named RUN.TASK. Each subcommand asks a backend (sonar.api.poisoned.*), which needs backends of this version.',
    );
  withOperatorOptions(
    cmd
      .command('list')
      .description(
        "list poisoned tasks: each one's attempt, operator retries so far and last error",
      )
      .option('--run <id>', 'only this run'),
  ).action(async (flags: Flags & { run?: string }) => {
    if (flags.run !== undefined) assertId('--run', flags.run);
    const { tasks: rows } = await operatorRequest(flags, (api) =>
      api.request<'poisoned.list', { tasks: PoisonedTask[] }>(
        'poisoned.list',
        flags.run === undefined ? {} : { runId: flags.run },
      ),
    );
    await (flags.json ? json({ tasks: rows }) : writeOut(listText(rows)));
  });

  withOperatorOptions(
    cmd
      .command('show')
      .description(
        'show a poisoned task: its step, attempt, output ref and size, and every finalization error (when, which delivery, whether permanent)',
      )
      .argument('<task>', 'RUN.TASK'),
  ).action(async (ref: string, flags: Flags) => {
    const detail = await operatorRequest(flags, (api) =>
      api.request<'poisoned.show', PoisonedDetail>('poisoned.show', idsOf(ref)),
    );
    await (flags.json ? json(detail) : writeOut(showText(detail)));
  });

  withOperatorOptions(
    cmd
      .command('retry')
      .description(
        'finalize a poisoned task again once its cause is fixed: a new finalization job, in a new round; its step, Blocked by it, is Ready again',
      )
      .argument('<task>', 'RUN.TASK')
      .option('--by <name>', 'who retries (default: user@host)'),
  ).action(async (ref: string, flags: Flags & { by?: string }) => {
    const out = await operatorRequest(flags, (api) =>
      api.request<'poisoned.retry', RetryOutcome>('poisoned.retry', {
        ...idsOf(ref),
        by: flags.by ?? operatorName(),
      }),
    );
    await (flags.json
      ? json(out)
      : writeOut(`${out.task} retried (round ${out.round}); step ${out.step ?? '-'}\n`));
  });

  withOperatorOptions(
    cmd
      .command('cancel')
      .description(
        'cancel a poisoned task, giving its output up: its step fails (at once when it was Blocked, else once its other tasks settle)',
      )
      .argument('<task>', 'RUN.TASK')
      .option('--reason <text>', 'why', 'poisoned task cancelled by an operator'),
  ).action(async (ref: string, flags: Flags & { reason: string }) => {
    const out = await operatorRequest(flags, (api) =>
      api.request<'poisoned.cancel', CancelOutcome>('poisoned.cancel', {
        ...idsOf(ref),
        reason: flags.reason,
      }),
    );
    await (flags.json ? json(out) : writeOut(`${out.task} cancelled; step ${out.step ?? '-'}\n`));
  });
}
