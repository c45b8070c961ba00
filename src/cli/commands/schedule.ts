import type { Command } from 'commander';
import { ValidationError } from '../../../actors/errors.js';
import {
  CATCH_UP_POLICIES,
  OVERLAP_POLICIES,
  SCHEDULE_NAME_RE,
} from '../../../actors/schedule/schedule.events.js';
import { formatDuration, parseDuration } from '../../duration.js';
import { newId } from '../../ids.js';
import type { RequestOf } from '../../protocol.js';
import type { ScheduleInfo } from '../../schedules/schedule-info.js';
import { UsageError, writeOut } from '../../display/output.js';
import { operatorName, readUserFile, withOperatorOptions } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { operatorRequest } from '../operator-request.js';

interface Flags extends ConnectionFlags {
  json?: boolean;
}

interface CreateFlags extends Flags {
  cron?: string;
  tz?: string;
  every?: string;
  run: string;
  overlap?: string;
  catchUp?: string;
  catchUpLimit?: string;
  missedAfter?: string;
}

function nameOf(name: string): string {
  if (!SCHEDULE_NAME_RE.test(name)) {
    throw new UsageError(
      `schedule name must match ${String(SCHEDULE_NAME_RE)}, got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new UsageError(
      `${flag} must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
  return value as T;
}

function durationFlag(flag: string, value: string): number {
  try {
    return parseDuration(value);
  } catch (err: unknown) {
    throw new UsageError(`${flag}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function readTemplate(file: string): Promise<Record<string, unknown>> {
  const text = await readUserFile(file);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ValidationError(`${file} is not JSON: ${why}`, [{ path: 'run', message: why }]);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ValidationError(`${file} is not a run file (a JSON object)`, [
      { path: 'run', message: 'must be an object' },
    ]);
  }
  return raw as Record<string, unknown>;
}

const when = (spec: ScheduleInfo): string =>
  spec.cron !== null
    ? `cron "${spec.cron}" ${spec.timezone ?? 'UTC'}`
    : `every ${formatDuration(spec.everyMs ?? 0)}`;

function listText(rows: ScheduleInfo[]): string {
  if (rows.length === 0) return 'no schedules\n';
  const lines = rows.map((s) => {
    const last = s.lastRun ? `${s.lastRun.runId} (${s.lastRun.runState ?? '-'})` : '-';
    return [
      `${s.name}  ${s.state}  ${when(s)}`,
      `  next  ${s.next ?? '-'}`,
      `  last  ${last}`,
      `  overlap ${s.overlap}, catch-up ${s.catchUp} (up to ${s.catchUpLimit}), missed after ${formatDuration(s.missedAfterMs)}; ${s.fires} fires, ${s.runs} runs`,
    ].join('\n');
  });
  return `${lines.join('\n')}\n`;
}

const json = (value: unknown): Promise<void> => writeOut(`${JSON.stringify(value, null, 2)}\n`);

/**
 * `sonar schedule create|list|pause|resume|delete|trigger` (docs/schedules.md): each asks a
 * backend (`sonar.api.schedule.*`, an operator verb), which judges and appends; the CLI never
 * writes an event itself.
 */
export function registerSchedule(program: Command): void {
  const cmd = program
    .command('schedule')
    .summary('create, list, pause, resume, delete or trigger schedules')
    .description(
      'a schedule submits a run from a template at each due time of a cron expression (in a time zone) or an interval; the reconciler leader fires it, exactly once per due time across the fleet. ' +
        'Run ids are <schedule>-<due time, e.g. 20260101T020000Z>. Each subcommand asks a backend (sonar.api.schedule.*), which needs backends of this version.',
    );
  withOperatorOptions(
    cmd
      .command('create')
      .description(
        'create a schedule: a run template (a run file without runId) and either --cron or --every. Creating the same schedule again is a no-op; other settings under the same name are refused',
      )
      .argument('<name>', `schedule name (${String(SCHEDULE_NAME_RE)})`)
      .requiredOption('--run <file>', 'the run template: a run file without runId')
      .option('--cron <expr>', 'cron expression: 5 fields, or 6 with seconds first')
      .option('--tz <zone>', 'IANA time zone of --cron (default: UTC)')
      .option(
        '--every <duration>',
        'interval, whole seconds (e.g. 15m): due at its multiples since the epoch',
      )
      .option(
        '--overlap <policy>',
        `${OVERLAP_POLICIES.join(' | ')}: a due time while the last run is going (default: skip)`,
      )
      .option(
        '--catch-up <policy>',
        `${CATCH_UP_POLICIES.join(' | ')}: due times missed while down (default: last)`,
      )
      .option(
        '--catch-up-limit <n>',
        'at most this many missed due times run by --catch-up all (default: 10, at most 100)',
      )
      .option(
        '--missed-after <duration>',
        'a due time not fired this long after it came is missed (default: 60s, at most 1d)',
      ),
  ).action(async (name: string, flags: CreateFlags) => {
    if ((flags.cron === undefined) === (flags.every === undefined)) {
      throw new UsageError('give exactly one of --cron and --every');
    }
    if (flags.tz !== undefined && flags.cron === undefined) {
      throw new UsageError('--tz goes with --cron');
    }
    const req: RequestOf<'schedule.create'> = {
      name: nameOf(name),
      run: await readTemplate(flags.run),
      by: operatorName(),
      ...(flags.cron !== undefined && { cron: flags.cron }),
      ...(flags.tz !== undefined && { timezone: flags.tz }),
      ...(flags.every !== undefined && { everyMs: durationFlag('--every', flags.every) }),
      ...(flags.overlap !== undefined && {
        overlap: oneOf('--overlap', flags.overlap, OVERLAP_POLICIES),
      }),
      ...(flags.catchUp !== undefined && {
        catchUp: oneOf('--catch-up', flags.catchUp, CATCH_UP_POLICIES),
      }),
      ...(flags.catchUpLimit !== undefined && { catchUpLimit: Number(flags.catchUpLimit) }),
      ...(flags.missedAfter !== undefined && {
        missedAfterMs: durationFlag('--missed-after', flags.missedAfter),
      }),
    };
    const info = await operatorRequest(flags, (api) =>
      api.request<'schedule.create', ScheduleInfo>('schedule.create', req),
    );
    await (flags.json ? json(info) : writeOut(listText([info])));
  });

  withOperatorOptions(
    cmd
      .command('list')
      .description(
        'list schedules (deleted ones only by name): settings, next due time, last run and its state',
      )
      .argument('[name]', 'only this schedule'),
  ).action(async (name: string | undefined, flags: Flags) => {
    const { schedules } = await operatorRequest(flags, (api) =>
      api.request<'schedule.list', { schedules: ScheduleInfo[] }>(
        'schedule.list',
        name === undefined ? {} : { name: nameOf(name) },
      ),
    );
    await (flags.json ? json({ schedules }) : writeOut(listText(schedules)));
  });

  const moves = [
    ['pause', 'stop firing (trigger still works); due times while paused are never run'],
    ['resume', 'fire again, from the next due time after now'],
    ['delete', 'delete for good (its runs are left alone; the name is not used again)'],
  ] as const;
  for (const [verb, what] of moves) {
    withOperatorOptions(
      cmd.command(verb).description(what).argument('<name>', 'schedule name'),
    ).action(async (name: string, flags: Flags) => {
      const info = await operatorRequest(flags, (api) =>
        api.request<`schedule.${typeof verb}`, ScheduleInfo>(`schedule.${verb}`, {
          name: nameOf(name),
          by: operatorName(),
        }),
      );
      await (flags.json ? json(info) : writeOut(`${info.name}  ${info.state}\n`));
    });
  }

  withOperatorOptions(
    cmd
      .command('trigger')
      .description(
        'fire now, whatever the due times and the overlap policy say (paused too): submits <name>-<time>-manual',
      )
      .argument('<name>', 'schedule name'),
  ).action(async (name: string, flags: Flags) => {
    const fired = await operatorRequest(flags, (api) =>
      api.request<'schedule.trigger', { name: string; runId: string; submitted: boolean }>(
        'schedule.trigger',
        { name: nameOf(name), requestId: newId(), by: operatorName() },
      ),
    );
    await (flags.json
      ? json(fired)
      : writeOut(
          `${fired.runId}${fired.submitted ? '' : ' (fired; its submit is retried by the leader)'}\n`,
        ));
  });
}
