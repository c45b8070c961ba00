import { applyEvent, createProjection } from '../../actors/projection.js';
import type { EventRecord, Projection } from '../../actors/projection.js';
import { EventStore } from '../../streams/event-store.js';
import { purgedEvents } from '../backend/snapshots/index.js';
import { readSnapshot } from './read-projection.js';
import type { ReadContext } from './read-projection.js';

/** One run as `sonar rerun` reads it. */
export interface RunRead {
  /** A projection holding the run (and, when taken from the snapshot, the others too). */
  projection: Projection;
  /** Events read from the stream: the run's own only. */
  eventsRead: number;
  /** Whether the run came from the projection snapshot (its events were purged). */
  fromSnapshot: boolean;
}

const bySeq = (a: EventRecord, b: EventRecord): number => a.seq - b.seq;

/**
 * Whether the fold holds the run as a whole fold of the stream would: its summary once
 * expired, else the run, each of its steps, and each step's every task. A retention pass cut
 * short purges tasks first and the run subject last, so a run can lose its tasks first.
 */
function holdsRun(p: Projection, runId: string): boolean {
  if (p.expiredRuns.has(runId)) return true;
  const run = p.runs.get(runId);
  if (!run) return false;
  return run.snapshot.context.stepIds.every((stepId) => {
    const key = `${runId}.${stepId}`;
    const step = p.steps.get(key);
    return (
      step !== undefined && (p.stepTasks.get(key)?.length ?? 0) === step.snapshot.context.taskCount
    );
  });
}

/**
 * Folds one run from its own subjects only (one ordered consumer each: 2.9 takes one filter
 * per consumer), never the other runs' events. Its aggregates' events are all it takes: every
 * change to a run, step or task is an event on that aggregate's subject. A run that retention
 * purged but did not expire yet lives only in the projection snapshot: then the snapshot is
 * loaded and the run's events after its sequence folded onto it, as a backend's start would.
 */
export async function readRun(ctx: ReadContext, runId: string): Promise<RunRead> {
  const store = new EventStore(ctx.nc, ctx.names);
  const records: EventRecord[] = [];
  for (const filter of ctx.names.subjects.runAll(runId)) {
    await store.replay((r) => void records.push(r), { filter });
  }
  records.sort(bySeq);
  const own = createProjection();
  for (const r of records) applyEvent(own, r);
  const read: RunRead = { projection: own, eventsRead: records.length, fromSnapshot: false };
  if (holdsRun(own, runId)) return read;
  const jsm = await store.jsm();
  // Nothing purged: the stream is whole, and the run is not in it (or not all written yet).
  if (purgedEvents((await jsm.streams.info(ctx.names.streams.events)).state) === null) return read;
  const from = await readSnapshot(ctx, jsm);
  if (from === null) return read;
  for (const r of records) if (r.seq > from.header.seq) applyEvent(from.projection, r);
  return { ...read, projection: from.projection, fromSnapshot: true };
}
