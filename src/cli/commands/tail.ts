import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import { isEventType } from '../../../actors/events.js';
import type { EventRecord } from '../../../actors/projection.js';
import { EventStore } from '../../../streams/event-store.js';
import { isOfRun, toJsonlLine } from '../../../streams/jsonl.js';
import { parseDuration } from '../../duration.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { isTty, paint, UsageError, writeOut } from '../../display/output.js';
import type { Color } from '../../display/output.js';

interface TailFlags extends ConnectionFlags {
  run?: string;
  task?: string;
  type?: string;
  since?: string;
  json?: boolean;
}

/** The data fields worth a glance, in this order, when present. */
const KEY_FIELDS = [
  'attempt',
  'attemptId',
  'tag',
  'workerId',
  'reason',
  'recoveries',
  'exitCode',
  'error',
  'outputRef',
  'tags',
  'slots',
  'nodeId',
  'taskCount',
] as const;

function colorOf(type: string): Color {
  if (/Failed|Dead|Poisoned|Lost|Cancelled|Skipped/.test(type)) return 'red';
  if (/Succeeded|Finalized|Joined|Ready|Served/.test(type)) return 'green';
  if (/Requeued|Draining|Starved|Blocked|Retried/.test(type)) return 'yellow';
  return 'cyan';
}

/** One readable line: time, subject, type, key fields. */
export function formatTailLine(r: EventRecord, color: boolean): string {
  const type = typeof r.type === 'string' ? r.type : '(undecodable)';
  const data = (r.data ?? {}) as Record<string, unknown>;
  const fields = KEY_FIELDS.filter((k) => data[k] !== undefined)
    .map((k) => `${k}=${typeof data[k] === 'string' ? data[k] : JSON.stringify(data[k])}`)
    .join(' ');
  return [paint(color, 'dim', r.time), r.subject, paint(color, colorOf(type), type), fields]
    .filter(Boolean)
    .join('  ');
}

function matches(r: EventRecord, f: TailFlags): boolean {
  if (f.type !== undefined && r.type !== f.type) return false;
  if (f.run !== undefined && !isOfRun(r.subject, f.run)) return false;
  if (f.task !== undefined) {
    const t = r.subject.split('.');
    if (t[2] !== 'task' || t[4] !== f.task) return false;
  }
  return true;
}

/** `sonar tail`: follow the event stream live, one line per event (JSONL with --json). */
export function registerTail(program: Command): void {
  program
    .command('tail')
    .summary('follow events live')
    .description(
      'follow the event log live, one readable line per event (coloured on a terminal), or JSONL with --json. ' +
        'It starts at new events, or --since ago, and runs until Ctrl-C (SIGINT) or SIGTERM.',
    )
    .option('--run <id>', 'only this run')
    .option('--task <id>', 'only this task (with --run, exactly that task)')
    .option('--type <type>', 'only this event type, e.g. TaskRequeued')
    .option('--since <duration>', 'start this long ago, e.g. 10m (default: new events only)')
    .option('--json', 'print JSONL, one event per line')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (flags: TailFlags) => {
      if (flags.run !== undefined) assertId('--run', flags.run);
      if (flags.task !== undefined) assertId('--task', flags.task);
      if (flags.type !== undefined && !isEventType(flags.type)) {
        throw new UsageError(`--type: unknown event type ${JSON.stringify(flags.type)}`);
      }
      let sinceMs: number | undefined;
      if (flags.since !== undefined) {
        try {
          sinceMs = parseDuration(flags.since);
        } catch (err: unknown) {
          throw new UsageError(`--since: ${(err as Error).message}`);
        }
      }
      await withConnection(
        flags,
        async ({ nc, names }) => {
          const store = new EventStore(nc, names);
          const filter =
            flags.run !== undefined && flags.task !== undefined
              ? names.subjects.task(flags.run, flags.task)
              : undefined;
          const { records, close } = await store.follow({
            ...(filter ? { filter } : {}),
            ...(sinceMs !== undefined
              ? { fromTime: new Date(Date.now() - sinceMs).toISOString() }
              : { onlyNew: true }),
          });
          const stop = () => void close();
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
          const color = !flags.json && isTty();
          for await (const r of records) {
            if (!matches(r, flags)) continue;
            await writeOut(`${flags.json ? toJsonlLine(r) : formatTailLine(r, color)}\n`);
          }
        },
        'long-lived',
      );
    });
}
