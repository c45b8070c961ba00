/**
 * The end of every chaos scenario: export the log with `sonar export`, read the results sink,
 * check the invariants, measure recovery, and (with `SONAR_CHAOS_SAVE=1`) save the log as a
 * replay scenario `test/replay/scenarios/chaos-<name>.jsonl` with its expected view.
 *
 * Saving is opt-in because a run's log differs every time (ids, times): rewriting the
 * scenario on every `npm test` would churn the replay suite's snapshots.
 */
import { appendFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { replay } from '../../actors/replay.js';
import { replayView } from '../../actors/replay-view.js';
import { ROOT } from '../helpers/worker-fixtures.js';
import { checkInvariants, parseLog } from './invariants.js';
import type { InvariantReport, LogLine } from './invariants.js';
import type { ChaosWorld } from './world.js';

/** One injected fault: what and when (wall clock, the same machine as the server's). */
export interface Fault {
  what: string;
  at: number;
}

export interface ScenarioReport extends InvariantReport {
  name: string;
  /** Milliseconds from each fault to the scenario's own sign of recovery. */
  recoveredMs: number[];
  durationMs: number;
}

/**
 * Picks, in a log, the time the system had recovered from a fault at `at` (null: never);
 * `next` is the next fault's time (Infinity for the last), to keep faults apart.
 */
export type RecoveredAt = (log: LogLine[], at: number, next: number) => number | null;

/** The first event at or after the fault that `matches`. */
export const firstAfter =
  (matches: (e: LogLine) => boolean): RecoveredAt =>
  (log, at) => {
    const e = log.find((l) => Date.parse(l.time) >= at && matches(l));
    return e ? Date.parse(e.time) : null;
  };

/**
 * Throughput is back for good: after the last stall (a gap of more than 3 s between two
 * finalizations) that follows the fault and precedes the next one, the first moment from
 * which `burst` results are finalized within one second. A trickle, or a burst before a
 * later stall, does not count.
 */
export const finalizingAgain =
  (burst = 5): RecoveredAt =>
  (log, at, next) => {
    const times = log
      .filter((l) => l.type === 'TaskFinalized')
      .map((l) => Date.parse(l.time))
      .filter((t) => t >= at && t < next);
    let from = 0;
    for (let i = 1; i < times.length; i++) if (times[i]! - times[i - 1]! > 3_000) from = i;
    for (let i = from; i + burst - 1 < times.length; i++) {
      if (times[i + burst - 1]! - times[i]! <= 1_000) return times[i]!;
    }
    // Fewer than a burst were left to finalize after the last stall (a fault late in the
    // run): the first of them shows the pipeline moving again, or the fault itself when
    // nothing was left at all.
    const left = times.length - from;
    if (next === Infinity && left < burst) return left === 0 ? at : times[from]!;
    return null;
  };

/**
 * Lost work runs again: every task requeued as `worker-lost` after the fault has been started
 * again (or ended Dead). The time of the last such restart.
 */
export const lostWorkRestarted: RecoveredAt = (log, at, next) => {
  const lost = new Set<string>();
  let last: number | null = null;
  for (const l of log) {
    const t = Date.parse(l.time);
    if (t < at) continue;
    // Losses of the next fault are that fault's; restarts of this one's still count.
    const mayLose = t < next;
    const key = l.subject;
    if (mayLose && l.type === 'TaskRequeued' && l.data['reason'] === 'worker-lost') lost.add(key);
    else if ((l.type === 'TaskStarted' || l.type === 'TaskDead') && lost.delete(key)) last = t;
  }
  // Nothing lost (the victims held no task): nothing to wait for.
  if (last === null && lost.size === 0) return at;
  return lost.size === 0 ? last : null;
};

export async function finishScenario(
  world: ChaosWorld,
  name: string,
  opts: {
    /** The faults, or how to find them in the log (a fault the run itself causes). */
    faults: Fault[] | ((log: LogLine[]) => Fault[]);
    recovered: RecoveredAt;
  },
): Promise<ScenarioReport> {
  const lines = await world.exportLog();
  const sink = await world.sink();
  const report = checkInvariants(lines, sink);
  const log = parseLog(lines);
  const faults = typeof opts.faults === 'function' ? opts.faults(log) : opts.faults;
  const recoveredMs = faults.map((f, i) => {
    const t = opts.recovered(log, f.at, faults[i + 1]?.at ?? Infinity);
    return t === null ? -1 : Math.max(0, t - f.at);
  });
  const out: ScenarioReport = {
    ...report,
    name,
    recoveredMs,
    durationMs: Date.now() - world.startedAt,
  };
  if (process.env['SONAR_CHAOS_SAVE'] === '1') await saveScenario(name, lines);
  const falseLosses = falselyLost(world, log);
  const summary = {
    name,
    tasks: out.stats.tasks,
    states: out.stats.states,
    recoveries: out.stats.recoveries,
    workersLost: out.stats.workersLost,
    elections: out.stats.elections,
    events: out.stats.events,
    faults: faults.map((f) => f.what),
    recoveredMs,
    durationMs: out.durationMs,
    ...(world.fenced.length > 0 && { fencedAndReplaced: world.fenced }),
    ...(falseLosses.length > 0 && { liveWorkersLost: falseLosses }),
  };
  console.log(`chaos ${JSON.stringify(summary)}`);
  const reportFile = process.env['SONAR_CHAOS_REPORT'];
  if (reportFile) await appendFile(reportFile, `${JSON.stringify(summary)}\n`);
  return out;
}

/**
 * The end of a scenario whose run must come through whole: waits for run `runId` to end
 * (within `timeoutMs`, or ChaosWorld.waitRunEnded's default), finishes the scenario as `name`
 * (see {@link finishScenario}) and expects the run Succeeded, no invariant violated and each
 * of its `tasks` tasks Succeeded. Gives the report, for the scenario's own checks.
 */
export async function finishClean(
  world: ChaosWorld,
  runId: string,
  name: string,
  opts: {
    faults: Fault[] | ((log: LogLine[]) => Fault[]);
    recovered: RecoveredAt;
    tasks: number;
    timeoutMs?: number;
  },
): Promise<ScenarioReport> {
  const status = await world.waitRunEnded(runId, opts.timeoutMs);
  expect(status.state).toBe('Succeeded');
  const report = await finishScenario(world, name, opts);
  expect(report.violations).toEqual([]);
  expect(report.stats.states).toEqual({ Succeeded: opts.tasks });
  return report;
}

/**
 * `WorkerLost` events for workers whose process was alive then and had not been killed: a
 * live worker declared lost (it will be refused with `conflict` and exit). Returned with the
 * worker's last warnings, for the summary line.
 */
function falselyLost(world: ChaosWorld, log: LogLine[]): string[] {
  const out: string[] = [];
  for (const e of log) {
    if (e.type !== 'WorkerLost') continue;
    const workerId = e.subject.split('.').at(-1);
    const proc = world.workers.find((p) => p.name === workerId);
    const at = Date.parse(e.time);
    if (!proc || proc.killedOnPurpose || (proc.exitedAt !== null && proc.exitedAt <= at)) continue;
    const tail = proc
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"warn"') || l.includes('"error"'))
      .slice(-3)
      .join(' | ');
    out.push(`${workerId} at ${e.time} (${JSON.stringify(e.data)}): ${tail.slice(0, 600)}`);
  }
  return out;
}

/** Writes `chaos-<name>.jsonl` and its expected `sonar replay --json` view. */
export async function saveScenario(name: string, lines: string[]): Promise<void> {
  const dir = join(ROOT, 'test', 'replay', 'scenarios');
  await writeFile(join(dir, `chaos-${name}.jsonl`), `${lines.join('\n')}\n`);
  const { projection, skipped } = replay(lines);
  await writeFile(
    join(dir, `chaos-${name}.expected.json`),
    JSON.stringify(replayView(projection, skipped), null, 2),
  );
}
