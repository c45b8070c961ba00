import { Kvm } from '@nats-io/kv';
import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import type { Projection } from '../../../actors/projection.js';
import { EventStore } from '../../../streams/event-store.js';
import { RECONCILER_LOCK } from '../../backend/reconciler/index.js';
import { planConfigOf } from '../../backend/reconciler/index.js';
import { Registry } from '../../backend/reconciler/index.js';
import { withConnection } from '../context.js';
import { readProjection } from '../read-projection.js';
import type { CliContext, ConnectionFlags } from '../context.js';
import { isTty, paint, writeOut } from '../../display/output.js';
import { shortDuration, stateCounts, stepState } from '../../display/run-progress.js';
import { statusView } from '../status-view.js';
import { approxSize } from '../../backend/storage/index.js';
import type { StatusView } from '../status-view.js';
import { TASK_STATES } from '../../backend/storage/index.js';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { ProgressStore } from '../../storage/task-progress.js';
import type { TaskProgress } from '../../storage/task-progress.js';
import { jetstreamOf } from '../../../streams/jetstream-api.js';

interface StatusFlags extends ConnectionFlags {
  run?: string;
  all?: boolean;
  json?: boolean;
}

async function lockHolder(ctx: CliContext): Promise<string | null> {
  const kv = await new Kvm(await jetstreamOf(ctx.nc, ctx.names)).open(ctx.names.buckets.locks);
  const e = await kv.get(RECONCILER_LOCK);
  return e?.operation === 'PUT' ? e.string() : null;
}

/** Progress lines per run in the text view; `--json` has all that were read. */
const SHOWN_PROGRESS = 10;
/** Running tasks per run whose progress is read. */
const READ_PROGRESS = 1_000;

/**
 * The stored progress of each shown run with Running tasks; none on a server whose backends
 * predate the progress bucket.
 */
async function progressOf(
  ctx: CliContext,
  p: Projection,
  flags: StatusFlags,
): Promise<Map<string, Map<string, TaskProgress>>> {
  // Only Running tasks' progress is shown: one get each, at most READ_PROGRESS per run.
  const running = new Map<string, string[]>();
  for (const key of p.tasksByState.Running) {
    const dot = key.indexOf('.');
    const runId = key.slice(0, dot);
    if (flags.run !== undefined && runId !== flags.run) continue;
    const tasks = running.get(runId) ?? [];
    if (tasks.length < READ_PROGRESS) tasks.push(key.slice(dot + 1));
    running.set(runId, tasks);
  }
  const out = new Map<string, Map<string, TaskProgress>>();
  if (running.size === 0) return out;
  const store = await ProgressStore.open(ctx.nc, ctx.names).catch(() => null);
  if (store === null) return out;
  for (const [runId, tasks] of running) out.set(runId, await store.ofTasks(runId, tasks));
  return out;
}

const counts = (tasks: StatusView['runs'][string]['tasks'], color: boolean): string =>
  stateCounts(
    Object.fromEntries(TASK_STATES.map((s) => [s, tasks[s] ?? 0])) as Parameters<
      typeof stateCounts
    >[0],
    color,
  ) || 'no tasks';

/** Delayed tasks are Pending ones held back by a notBefore: their own count, after the states. */
const delayedText = (delayed: number | undefined): string =>
  delayed === undefined ? '' : `  (${delayed} delayed)`;

/** The readable form of {@link StatusView}. */
export function statusText(v: StatusView, color: boolean): string {
  const lines: string[] = [];
  lines.push(
    `leader    ${v.leader.nodeId ?? paint(color, 'red', 'none (no backend holds the lock)')}` +
      (v.leader.since ? `  (since ${v.leader.since})` : ''),
  );
  lines.push(`workers   ${v.workers.length} live`);
  for (const w of v.workers) {
    const state = w.state === 'active' ? 'active' : paint(color, 'yellow', w.state);
    lines.push(
      `  ${w.workerId}  ${w.tags.join(',')}  slots ${w.slots}  running ${w.running}  ${state}  pulse ${shortDuration(w.pulseAgeMs)} ago`,
    );
  }
  const tags = Object.entries(v.capacity.tags)
    .map(([t, n]) => `${t} ${n}`)
    .join('  ');
  lines.push(`capacity  global ${v.capacity.global}${tags ? `  ${tags}` : ''}`);
  if (v.rateLimited) {
    const rates = Object.entries(v.rateLimited)
      .map(([t, r]) => `${t} ${r.rate} (${r.left} left)`)
      .join('  ');
    lines.push(`rates     ${rates}`);
  }
  const runIds = Object.keys(v.runs);
  lines.push(`runs      ${runIds.length === 0 ? 'none open (--all shows finished runs)' : ''}`);
  for (const runId of runIds) {
    const run = v.runs[runId]!;
    lines.push(
      `  ${runId}  ${stepState(run.state, false, color)}  ${counts(run.tasks, color)}${delayedText(run.delayed)}`,
    );
    if (run.expired) {
      lines.push(`    expired ${run.expired.at}: ended ${run.expired.endedAt}, summary only`);
    }
    const width = Math.max(...Object.keys(run.steps).map((s) => s.length), 4);
    for (const [stepId, s] of Object.entries(run.steps)) {
      lines.push(
        `    ${stepId.padEnd(width)}  ${stepState(s.state, s.starved, color)}  ${counts(s.tasks, color)}${delayedText(s.delayed)}`,
      );
    }
    const reported = Object.entries(run.progress ?? {});
    for (const [taskId, r] of reported.slice(0, SHOWN_PROGRESS)) {
      const ago = shortDuration(Math.max(0, Date.parse(v.now) - Date.parse(r.at)));
      lines.push(`    progress ${taskId}  ${JSON.stringify(r.value)}  (${ago} ago)`);
    }
    if (reported.length > SHOWN_PROGRESS) {
      lines.push(`    progress of ${reported.length - SHOWN_PROGRESS} more tasks: --json`);
    }
  }
  lines.push(
    `starved   ${v.starved.length === 0 ? 'none' : paint(color, 'yellow', v.starved.join(' '))}`,
  );
  lines.push(`finalize  ${v.finalizeQueue} queued`);
  lines.push(`poisoned  ${v.poisoned === 0 ? 0 : paint(color, 'red', String(v.poisoned))}`);
  if (v.eventsStore) lines.push(`store     ${eventsStoreText(v.eventsStore, color)}`);
  return `${lines.join('\n')}\n`;
}

/** `events 1.2 MiB of 4.0 MiB, 2.1 MiB free for new work`, or FULL with the way out. */
function eventsStoreText(s: NonNullable<StatusView['eventsStore']>, color: boolean): string {
  if (s.maxBytes === null)
    return `events ${approxSize(s.bytes)}, no bound (SONAR_EVENTS_MAX_BYTES)`;
  const used = `events ${approxSize(s.bytes)} of ${approxSize(s.maxBytes)}`;
  if (!s.full) return `${used}, ${approxSize(s.freeBytes ?? 0)} free for new work`;
  return `${used}, ${paint(color, 'red', 'FULL: new work is refused (store_full)')}; running tasks go on`;
}

/**
 * `sonar status [--run ID] [--all] [--json]`: folds the projection in this process as a
 * backend's start does (the snapshot, then the events after it), reads the registry, the leader lock and the finalize queue, and shows what the
 * reconciler sees. Capacity and starvation come from the reconciler's own pure planner.
 */
export function registerStatus(program: Command): void {
  program
    .command('status')
    .summary('show workers, capacity, runs, starved steps, queues and the leader')
    .description(
      "show live workers (tags, slots, active or draining, pulse age by the server's clock), capacity per tag and in all, tasks by state per run and step, starved steps, the finalize queue depth, the poisoned count and the reconciler leader. " +
        "It folds the event log in this process, as a backend starting does (the projection snapshot, then the events after it, so runs whose events retention purged still show), and computes capacity and starvation with the reconciler's own planner.",
    )
    .option('--run <id>', 'only this run (any state)')
    .option('--all', 'every run, finished ones too (default: runs with open work)')
    .option('--json', 'print JSON (the shape is in docs/metrics.md)')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (flags: StatusFlags) => {
      if (flags.run !== undefined) assertId('--run', flags.run);
      const view = await withConnection(flags, async (ctx) => {
        const jsm = await new EventStore(ctx.nc, ctx.names).jsm();
        const [projection, entries, holder, finalize, events] = await Promise.all([
          readProjection(ctx),
          Registry.open(ctx.nc, ctx.names).then((r) => r.live()),
          lockHolder(ctx),
          jsm.streams.info(ctx.names.streams.finalize),
          jsm.streams.info(ctx.names.streams.events),
        ]);
        if (
          flags.run !== undefined &&
          !projection.runs.has(flags.run) &&
          !projection.expiredRuns.has(flags.run)
        ) {
          throw new SonarError(ErrorCode.NotFound, `no run ${flags.run}`, { runId: flags.run });
        }
        return statusView({
          projection,
          progress: await progressOf(ctx, projection, flags),
          entries,
          now: Date.now(),
          planConfig: planConfigOf(ctx.config, true),
          finalizeQueue: finalize.state.messages,
          lockHolder: holder,
          eventsStore: { bytes: events.state.bytes, maxBytes: events.config.max_bytes ?? -1 },
          ...(flags.run !== undefined && { runId: flags.run }),
          ...(flags.all && { all: true }),
        });
      });
      await writeOut(flags.json ? `${JSON.stringify(view, null, 2)}\n` : statusText(view, isTty()));
    });
}
