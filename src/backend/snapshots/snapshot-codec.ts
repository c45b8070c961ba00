import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { createProjection, indexFresh } from '../../../actors/projection.js';
import type {
  Aggregate,
  ExpiredRun,
  OpenTaskState,
  Projection,
  StepIndex,
} from '../../../actors/projection.js';
import type { TaskState } from '../../../actors/task/task.machine.js';
import { TimedTasks } from '../../../actors/timed-tasks.js';
import type { Snap } from '../../../actors/transitioner.js';

/**
 * The projection snapshot's layout: gzip'd JSON lines. Line 1 is the {@link SnapshotHeader};
 * then one row per aggregate and per index; the last line is `["end", <rows>]`, so a
 * truncated object is told from a whole one. Bump {@link SNAPSHOT_FORMAT} with any change
 * here or to the Projection's shape: an older snapshot is then ignored (full replay). Once
 * retention has purged events an older format cannot be read at all, so a backend of the new
 * build refuses to start until `SONAR_ALLOW_SNAPSHOT_LOSS` is set (snapshot.ts): a bump needs
 * a migration or a release note.
 *
 * Rows (a JSON array whose first element names it):
 * - `["task"|"step"|"run"|"worker"|"schedule", key, seq, {value, context, status}]`
 *   (`schedule` rows since format 4)
 * - `["stepTasks", stepKey, [taskKey...]]`
 * - `["stepIndex", stepKey, counts, [taskKey...], [order...], [fresh...], [returned...], [[tag, n]...]]`
 *   (the `order` Map as its keys and its values, side by side)
 * - `["byState", state, [taskKey...]]`, `["activeSteps", [...]]`, `["activeRuns", [...]]`
 * - `["leader", {nodeId, time, seq} | null]`
 * - `["expiredRun", runId, {runId, state, reason, submittedAt, endedAt, taskCount, tasks,
 *   expiredAt, seq}]`, one per run evicted by `RunExpired`, in expiry order (format 3)
 * - `["publishTimes", tag, [ms...]]`, one per tag with recent publishes (format 5): what its
 *   rate limit counts. A snapshot of an older format has none; its buckets start full.
 *
 * `workersInService` is not written: it is the workers whose snapshot is active, in the
 * workers' order, and is rebuilt from their rows. Nor are a stepIndex's `lanes` and `timed`:
 * they are its `fresh` tasks filed by priority and time, rebuilt from their rows.
 *
 * Sets and Maps are written as arrays in iteration order, which the reconciler relies on
 * (creation order of steps and tasks), so a restored projection iterates exactly like a
 * folded one.
 */
export const SNAPSHOT_FORMAT = 5;

/**
 * Formats this build still reads: an upgrade after retention purged events must still read
 * the snapshot that holds them. Format 1 differs from 2 only in its stepIndex row (the order
 * map as `[[taskKey, order]...]`); format 2 from 3 in having no expired runs (no `expiredRun`
 * rows, no `expiredRuns` count in the header); format 3 from 4 in having no schedules (no
 * `schedule` rows, no `schedules` count); format 4 from 5 in having no `publishTimes` rows.
 */
export const READABLE_FORMATS: readonly number[] = [1, 2, 3, 4, 5];

export interface SnapshotHeader {
  format: 'sonar-projection';
  version: number;
  /**
   * Of the machines and fold code that built it (snapshot.ts): another build replays fully,
   * unless events were purged (then it loads this snapshot anyway).
   */
  fingerprint: string;
  /** Every event up to this stream sequence is folded in; replay resumes at seq + 1. */
  seq: number;
  /** Projection.lastSeq (equal to `seq` for the live loop). */
  lastSeq: number;
  /** Events the loop skipped so far (undecodable or refused), carried into its counter. */
  skipped: number;
  /** The events stream it was folded from; another stream (recreated) replays fully. */
  stream: { name: string; created: string };
  writtenAt: string;
  by: string;
  /** `expiredRuns` since format 3, `schedules` since format 4. */
  counts: {
    tasks: number;
    steps: number;
    runs: number;
    workers: number;
    expiredRuns?: number;
    schedules?: number;
  };
}

/**
 * The fields the codec knows. A projection with any other field cannot be snapshotted
 * faithfully: capture refuses it instead of silently dropping state (a unit test fails
 * when Projection grows, pointing here).
 */
export const PROJECTION_FIELDS = [
  'tasks',
  'steps',
  'runs',
  'workers',
  'schedules',
  'stepTasks',
  'tasksByState',
  'stepIndex',
  'activeSteps',
  'activeRuns',
  'expiredRuns',
  'workersInService',
  'publishTimes',
  'leader',
  'lastSeq',
] as const;

const AGGREGATE_ROWS = {
  task: 'tasks',
  step: 'steps',
  run: 'runs',
  worker: 'workers',
  schedule: 'schedules',
} as const;
type AggregateRow = keyof typeof AGGREGATE_ROWS;

/** A point-in-time copy of a projection, cheap to take, encoded later (see captureProjection). */
export interface Capture {
  header: SnapshotHeader;
  /** Aggregates as parallel arrays: a tenth of the memory of one small array per row. */
  aggregates: { kind: AggregateRow; keys: string[]; seqs: number[]; snaps: unknown[] }[];
  /** The index rows, copied. */
  rows: unknown[][];
}

/**
 * Copies what a snapshot needs, synchronously, so that the projection loop may go on folding
 * while the copy is encoded and uploaded over many event-loop turns.
 *
 * Why references suffice for aggregates: the fold never mutates a `{value, context, status}`
 * snapshot or its context in place; each transition makes new ones (XState's assign copies
 * the context) and only `entry.snapshot`/`entry.seq` are reassigned, which are read here.
 * The indexes (Sets, Maps, arrays, counts) are mutated in place, so they are copied.
 * Capturing is quick; stringifying a large projection here would block the loop for long
 * (docs/benchmarks.md).
 */
export function captureProjection(
  p: Projection,
  meta: Omit<SnapshotHeader, 'format' | 'version' | 'lastSeq' | 'counts'>,
): Capture {
  const unknown = Object.keys(p).filter(
    (k) => !(PROJECTION_FIELDS as readonly string[]).includes(k),
  );
  if (unknown.length > 0) {
    throw new SonarError(
      ErrorCode.Validation,
      `projection field(s) ${unknown.join(', ')} unknown to the snapshot codec: add them to src/backend/snapshots/snapshot-codec.ts and bump SNAPSHOT_FORMAT`,
    );
  }
  const aggregates: Capture['aggregates'] = [];
  for (const kind of Object.keys(AGGREGATE_ROWS) as AggregateRow[]) {
    const table = p[AGGREGATE_ROWS[kind]] as Map<string, Aggregate<Snap<unknown>>>;
    const keys = new Array<string>(table.size);
    const seqs = new Array<number>(table.size);
    const snaps = new Array<unknown>(table.size);
    let i = 0;
    for (const [key, a] of table) {
      keys[i] = key;
      seqs[i] = a.seq;
      snaps[i++] = a.snapshot;
    }
    aggregates.push({ kind, keys, seqs, snaps });
  }
  const rows: unknown[][] = [];
  for (const [key, list] of p.stepTasks) rows.push(['stepTasks', key, list.slice()]);
  for (const [key, i] of p.stepIndex) {
    rows.push([
      'stepIndex',
      key,
      { ...i.counts },
      [...i.order.keys()],
      [...i.order.values()],
      [...i.fresh],
      [...i.returned],
      [...i.pendingTags],
    ]);
  }
  for (const [state, keys] of Object.entries(p.tasksByState))
    rows.push(['byState', state, [...keys]]);
  rows.push(['activeSteps', [...p.activeSteps]]);
  rows.push(['activeRuns', [...p.activeRuns]]);
  rows.push(['leader', p.leader && { ...p.leader }]);
  // Summaries are never changed in place once set (evictRun makes a new one): references do.
  for (const [runId, summary] of p.expiredRuns) rows.push(['expiredRun', runId, summary]);
  for (const [tag, times] of p.publishTimes) rows.push(['publishTimes', tag, times.slice()]);
  return {
    header: {
      format: 'sonar-projection',
      version: SNAPSHOT_FORMAT,
      ...meta,
      lastSeq: p.lastSeq,
      counts: {
        tasks: p.tasks.size,
        steps: p.steps.size,
        runs: p.runs.size,
        workers: p.workers.size,
        expiredRuns: p.expiredRuns.size,
        schedules: p.schedules.size,
      },
    },
    aggregates,
    rows,
  };
}

/**
 * The capture as JSON lines, lazily: each yielded string holds whole lines (about
 * `batchChars` long), so the caller can stream it without building one huge string. Kept
 * under V8's 128 KiB regular-object limit: larger strings go to large-object space, which
 * only a full GC frees, and a large snapshot then grew the heap markedly.
 */
export function* encodeCapture(c: Capture, batchChars = 60 * 1024): Generator<string> {
  let batch = `${JSON.stringify(c.header)}\n`;
  let count = 0;
  for (const { kind, keys, seqs, snaps } of c.aggregates) {
    for (let i = 0; i < keys.length; i++) {
      batch += `${JSON.stringify([kind, keys[i], seqs[i], snaps[i]])}\n`;
      count++;
      if (batch.length >= batchChars) {
        yield batch;
        batch = '';
      }
    }
  }
  for (const row of c.rows) {
    batch += `${JSON.stringify(row)}\n`;
    count++;
    if (batch.length >= batchChars) {
      yield batch;
      batch = '';
    }
  }
  yield `${batch}${JSON.stringify(['end', count])}\n`;
}

/** Why a stored snapshot was not used. */
export class SnapshotUnusableError extends SonarError {
  override readonly name = 'SnapshotUnusableError';
  constructor(
    readonly reason: 'corrupt' | 'old-version',
    message: string,
    options?: ErrorOptions,
  ) {
    super(ErrorCode.Decode, message, { reason }, options);
  }
}

const corrupt = (why: string): SnapshotUnusableError =>
  new SnapshotUnusableError('corrupt', `snapshot is corrupt: ${why}`);

const isStringArray = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'string');

function entriesOf<V>(v: unknown, isValue: (x: unknown) => x is V): [string, V][] {
  if (!Array.isArray(v)) throw corrupt('an index is not a list');
  for (const e of v) {
    if (!Array.isArray(e) || e.length !== 2 || typeof e[0] !== 'string' || !isValue(e[1])) {
      throw corrupt('an index entry is malformed');
    }
  }
  return v as [string, V][];
}

const isNumber = (x: unknown): x is number => typeof x === 'number';

/**
 * Rebuilds a projection from snapshot lines, one `push` per line. Throws
 * SnapshotUnusableError (`old-version` for another format or fingerprint, `corrupt` for
 * anything malformed or truncated); never returns a partial projection.
 */
export class SnapshotDecoder {
  private header: SnapshotHeader | null = null;
  private readonly p = createProjection();
  private rows = 0;
  private ended = false;

  constructor(private readonly expect: { fingerprint: string }) {}

  push(line: string): void {
    if (line === '') return;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (err: unknown) {
      throw new SnapshotUnusableError('corrupt', 'snapshot is corrupt: a line is not JSON', {
        cause: err,
      });
    }
    if (this.ended) throw corrupt('lines after the end');
    if (this.header === null) {
      this.header = this.checkHeader(row);
      return;
    }
    if (!Array.isArray(row) || typeof row[0] !== 'string') throw corrupt('a row is not a list');
    if (row[0] === 'end') {
      if (row[1] !== this.rows) throw corrupt(`${this.rows} rows, the end says ${String(row[1])}`);
      this.ended = true;
      return;
    }
    this.rows++;
    this.apply(row as [string, ...unknown[]]);
  }

  /** The projection and its header; throws when the end line never came. */
  finish(): { header: SnapshotHeader; projection: Projection } {
    const h = this.header;
    if (h === null || !this.ended) throw corrupt('truncated (no end line)');
    const p = this.p;
    const sizes = {
      tasks: p.tasks.size,
      steps: p.steps.size,
      runs: p.runs.size,
      workers: p.workers.size,
      ...(h.version >= 3 && { expiredRuns: p.expiredRuns.size }),
      ...(h.version >= 4 && { schedules: p.schedules.size }),
    };
    if (JSON.stringify(sizes) !== JSON.stringify(h.counts)) {
      throw corrupt(`counts ${JSON.stringify(sizes)} differ from the header's`);
    }
    for (const [id, { snapshot }] of p.workers) {
      if (snapshot.status === 'active') p.workersInService.add(id);
    }
    for (const index of p.stepIndex.values()) {
      for (const key of index.fresh) {
        const context = p.tasks.get(key)?.snapshot.context;
        if (!context) throw corrupt(`fresh task ${key} has no row`);
        indexFresh(index, key, context); // already in `fresh`: only lanes and timed change
      }
    }
    p.lastSeq = h.lastSeq;
    return { header: h, projection: p };
  }

  private checkHeader(row: unknown): SnapshotHeader {
    const h = row as Partial<SnapshotHeader> | null;
    if (typeof h !== 'object' || h === null || h.format !== 'sonar-projection') {
      throw corrupt('no header');
    }
    if (typeof h.version !== 'number' || !READABLE_FORMATS.includes(h.version)) {
      throw new SnapshotUnusableError(
        'old-version',
        `snapshot format ${String(h.version)} is not ${SNAPSHOT_FORMAT}`,
      );
    }
    if (h.fingerprint !== this.expect.fingerprint) {
      throw new SnapshotUnusableError(
        'old-version',
        'snapshot was written by a build with other machines or fold code',
      );
    }
    if (
      !Number.isSafeInteger(h.seq) ||
      !Number.isSafeInteger(h.lastSeq) ||
      typeof h.stream?.created !== 'string' ||
      typeof h.counts !== 'object'
    ) {
      throw corrupt('header fields missing');
    }
    return h as SnapshotHeader;
  }

  private apply(row: [string, ...unknown[]]): void {
    const p = this.p;
    const [tag, a, b, c, d, e, f, g] = row;
    switch (tag) {
      case 'task':
      case 'step':
      case 'run':
      case 'worker':
      case 'schedule': {
        if (typeof a !== 'string' || !isNumber(b)) throw corrupt(`a ${tag} row is malformed`);
        const snap = snapOf(c, tag);
        const table = p[AGGREGATE_ROWS[tag]] as Map<string, Aggregate<Snap<unknown>>>;
        table.set(a, { snapshot: snap, seq: b });
        return;
      }
      case 'stepTasks':
        if (typeof a !== 'string' || !isStringArray(b))
          throw corrupt('a stepTasks row is malformed');
        p.stepTasks.set(a, b);
        return;
      case 'stepIndex': {
        if (typeof a !== 'string' || typeof b !== 'object' || b === null) {
          throw corrupt('a stepIndex row is malformed');
        }
        if (this.header?.version === 1) {
          // Format 1: [tag, key, counts, [[taskKey, order]...], fresh, returned, tags].
          if (!isStringArray(d) || !isStringArray(e))
            throw corrupt('a stepIndex queue is malformed');
          p.stepIndex.set(a, {
            counts: b as Record<TaskState, number>,
            order: new Map(entriesOf(c, isNumber)),
            fresh: new Set(d),
            returned: new Set(e),
            pendingTags: new Map(entriesOf(f, isNumber)),
            lanes: new Map(),
            timed: new TimedTasks(),
          });
          return;
        }
        if (
          !isStringArray(c) ||
          !Array.isArray(d) ||
          c.length !== d.length ||
          !d.every(isNumber) ||
          !isStringArray(e) ||
          !isStringArray(f)
        ) {
          throw corrupt('a stepIndex queue is malformed');
        }
        const order = new Map<string, number>();
        c.forEach((key, i) => order.set(key, d[i] as number));
        const index: StepIndex = {
          counts: b as Record<TaskState, number>,
          order,
          fresh: new Set(e),
          returned: new Set(f),
          pendingTags: new Map(entriesOf(g, isNumber)),
          lanes: new Map(),
          timed: new TimedTasks(),
        };
        p.stepIndex.set(a, index);
        return;
      }
      case 'byState': {
        const set = p.tasksByState[a as OpenTaskState] as Set<string> | undefined;
        if (!set || !isStringArray(b)) throw corrupt('a byState row is malformed');
        for (const k of b) set.add(k);
        return;
      }
      case 'activeSteps':
      case 'activeRuns':
        if (!isStringArray(a)) throw corrupt(`an ${tag} row is malformed`);
        for (const k of a) p[tag].add(k);
        return;
      case 'leader':
        p.leader = (a ?? null) as Projection['leader'];
        return;
      case 'expiredRun':
        if (typeof a !== 'string' || !isExpiredRun(b) || b.runId !== a) {
          throw corrupt('an expiredRun row is malformed');
        }
        p.expiredRuns.set(a, b);
        return;
      case 'publishTimes':
        if (typeof a !== 'string' || !Array.isArray(b) || !b.every(isNumber)) {
          throw corrupt('a publishTimes row is malformed');
        }
        p.publishTimes.set(a, b);
        return;
      default:
        throw corrupt(`unknown row ${JSON.stringify(tag)}`);
    }
  }
}

function isExpiredRun(v: unknown): v is ExpiredRun {
  const r = v as Partial<Record<keyof ExpiredRun, unknown>> | null;
  return (
    typeof r === 'object' &&
    r !== null &&
    typeof r.runId === 'string' &&
    typeof r.state === 'string' &&
    (r.reason === null || typeof r.reason === 'string') &&
    typeof r.submittedAt === 'string' &&
    typeof r.endedAt === 'string' &&
    isNumber(r.taskCount) &&
    typeof r.tasks === 'object' &&
    r.tasks !== null &&
    typeof r.expiredAt === 'string' &&
    isNumber(r.seq)
  );
}

function snapOf(v: unknown, kind: AggregateRow): Snap<unknown> {
  const s = v as Partial<Snap<Record<string, unknown>>> | null;
  if (
    typeof s !== 'object' ||
    s === null ||
    typeof s.value !== 'string' ||
    (s.status !== 'active' && s.status !== 'done') ||
    typeof s.context !== 'object' ||
    s.context === null
  ) {
    throw corrupt(`a ${kind} snapshot is malformed`);
  }
  if (kind === 'task') {
    // JSON drops keys whose value is undefined; give the spec back the exact shape
    // initialTaskContext makes (optional command and input present as undefined).
    const spec = s.context['spec'] as Record<string, unknown>;
    s.context['spec'] = {
      runId: spec['runId'],
      stepId: spec['stepId'],
      taskId: spec['taskId'],
      tags: spec['tags'],
      command: spec['command'],
      input: spec['input'],
      maxAttempts: spec['maxAttempts'],
      priority: spec['priority'],
      notBefore: spec['notBefore'],
      delayMs: spec['delayMs'],
    };
  }
  return { value: s.value, context: s.context, status: s.status };
}
