/**
 * The invariants every chaos scenario must hold after its run, checked from the
 * exported event log and the results sink only: what an operator could check after a real
 * incident, with no access to any process's memory.
 *
 * - every task is settled (terminal, or Poisoned: held, never lost);
 * - every Succeeded task has exactly one `TaskFinalized`, from its final attempt, and exactly
 *   one sink record, stamped with that attempt (delivery is at-least-once, the effect once);
 * - no attempt is started twice;
 * - no appended event is one its machine refuses (replay skips nothing);
 * - nothing is Pending, Published, Running or Finalizing after the run.
 */
import { replay } from '../../actors/replay.js';
import type { Projection } from '../../actors/projection.js';
import type { StoredResult } from '../../src/storage/results-sink.js';

/** Settled: the task will not move again on its own. */
const SETTLED = new Set(['Succeeded', 'Failed', 'Dead', 'Cancelled', 'Poisoned']);

export interface LogLine {
  seq: number;
  subject: string;
  time: string;
  type: string;
  data: Record<string, unknown>;
}

/** What a run went through, for the faults-survived table. */
export interface RunStats {
  tasks: number;
  /** Tasks per final state. */
  states: Record<string, number>;
  /** `TaskRequeued` per reason, plus `dead` for `TaskDead`. */
  recoveries: Record<string, number>;
  /** `WorkerLost` events. */
  workersLost: number;
  /** `ReconcilerElected` events (1 + leader failovers). */
  elections: number;
  events: number;
}

export interface InvariantReport {
  violations: string[];
  stats: RunStats;
  projection: Projection;
}

export interface Sink {
  records: Map<string, StoredResult>;
  /** Writes the sink's stream ever took (KV history 1: a rewrite shows up here only). */
  writes: number;
}

/** Parses exported JSONL (lines `sonar export` wrote; they must all be JSON). */
export function parseLog(lines: readonly string[]): LogLine[] {
  return lines.filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as LogLine);
}

const count = (m: Record<string, number>, k: string): void => {
  m[k] = (m[k] ?? 0) + 1;
};

export function checkInvariants(lines: readonly string[], sink: Sink): InvariantReport {
  const violations: string[] = [];
  const fail = (msg: string): void => {
    // Enough to diagnose; a broken invariant usually breaks it for many tasks at once.
    if (violations.length < 50) violations.push(msg);
  };
  const { projection, skipped } = replay(lines);
  for (const s of skipped) fail(`replay skipped seq ${s.seq}: ${s.reason}`);

  const log = parseLog(lines);
  const finalized = new Map<string, string[]>();
  const started = new Map<string, number>();
  const published = new Map<string, string>();
  const stats: RunStats = {
    tasks: projection.tasks.size,
    states: {},
    recoveries: {},
    workersLost: 0,
    elections: 0,
    events: log.length,
  };
  for (const e of log) {
    const key = e.subject.split('.').slice(3).join('.');
    const given = e.data['attemptId'];
    const attemptId = typeof given === 'string' ? given : '';
    switch (e.type) {
      case 'TaskPublished': {
        const other = published.get(attemptId);
        if (other !== undefined) fail(`attempt ${attemptId} published for ${other} and ${key}`);
        published.set(attemptId, key);
        break;
      }
      case 'TaskStarted':
        started.set(attemptId, (started.get(attemptId) ?? 0) + 1);
        break;
      case 'TaskFinalized':
        finalized.set(key, [...(finalized.get(key) ?? []), attemptId]);
        break;
      case 'TaskRequeued':
        count(stats.recoveries, String(e.data['reason']));
        break;
      case 'TaskDead':
        count(stats.recoveries, 'dead');
        break;
      case 'WorkerLost':
        stats.workersLost++;
        break;
      case 'ReconcilerElected':
        stats.elections++;
        break;
    }
  }
  for (const [attemptId, n] of started) {
    if (n > 1) fail(`attempt ${attemptId} started ${n} times`);
  }

  for (const [key, { snapshot }] of projection.tasks) {
    const state = String(snapshot.value);
    count(stats.states, state);
    if (!SETTLED.has(state)) fail(`task ${key} is ${state} after the run`);
    const record = sink.records.get(key);
    if (state !== 'Succeeded') {
      if (record) fail(`task ${key} is ${state} but has a sink record`);
      continue;
    }
    const final = snapshot.context.attemptId;
    const fins = finalized.get(key) ?? [];
    if (fins.length !== 1 || fins[0] !== final) {
      fail(`task ${key}: TaskFinalized for [${fins.join(', ')}], final attempt ${final}`);
    }
    if (record?.attemptId !== final) {
      fail(`task ${key}: sink record from ${record?.attemptId ?? 'nothing'}, not ${final}`);
    }
  }
  for (const key of sink.records.keys()) {
    if (!projection.tasks.has(key)) fail(`sink record ${key} for a task the log never created`);
  }
  // One write per record: a second write for a task (a duplicate job that was not a no-op)
  // would raise the stream's last sequence above the record count.
  if (sink.writes !== sink.records.size) {
    fail(`the sink took ${sink.writes} writes for ${sink.records.size} records`);
  }
  return { violations, stats, projection };
}
