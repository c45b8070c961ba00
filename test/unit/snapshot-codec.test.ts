import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createProjection } from '../../actors/projection.js';
import type { Projection } from '../../actors/projection.js';
import { parseEventLine, replay, replayRecords } from '../../actors/replay.js';
import type { EventRecord } from '../../actors/projection.js';
import { replayView } from '../../actors/replay-view.js';
import {
  PROJECTION_FIELDS,
  SNAPSHOT_FORMAT,
  SnapshotDecoder,
  SnapshotUnusableError,
  captureProjection,
  encodeCapture,
} from '../../src/backend/snapshots/snapshot-codec.js';
import {
  at,
  line,
  runCancelled,
  runExpired,
  runSubmitted,
  stepCreated,
  stepSkipped,
  subject,
  taskCancelled,
  taskCreated,
  taskPublished,
  taskRequeued,
  taskStarted,
  workerDraining,
  workerExpired,
  workerJoined,
  workerLeft,
} from '../helpers/event-builders.js';
import { dumpProjection } from '../helpers/projection-dump.js';

const FP = 'test-fingerprint';
const meta = (seq: number) => ({
  fingerprint: FP,
  seq,
  skipped: 0,
  stream: { name: 'SONAR_EVENTS', created: '2026-01-01T00:00:00.000Z' },
  writtenAt: '2026-01-01T00:00:00.000Z',
  by: 'node-1',
});

const encode = (p: Projection, fingerprint = FP): string =>
  [...encodeCapture(captureProjection(p, { ...meta(p.lastSeq), fingerprint }), 64)].join('');

function decode(text: string) {
  const d = new SnapshotDecoder({ fingerprint: FP });
  for (const l of text.split('\n')) d.push(l);
  return d.finish();
}

const dir = fileURLToPath(new URL('../replay/scenarios/', import.meta.url));
const scenarios = readdirSync(dir)
  .filter((f) => f.endsWith('.jsonl'))
  .map((f) => ({
    name: f.replace(/\.jsonl$/, ''),
    lines: readFileSync(dir + f, 'utf8').split('\n'),
  }));

/**
 * Tasks requeued and retried, interleaved across two steps, some ranked and timed: every index
 * gets entries.
 */
function mixedLog(tasks: number): string[] {
  const out: unknown[] = [
    line(1, subject.step('r', 'a'), stepCreated({ runId: 'r', stepId: 'a', taskCount: tasks })),
    line(2, subject.step('r', 'b'), stepCreated({ runId: 'r', stepId: 'b', taskCount: tasks })),
  ];
  let seq = 2;
  for (let i = 0; i < tasks; i++) {
    const stepId = i % 2 === 0 ? 'a' : 'b';
    // Some with a priority or a time of their own: the indexes a snapshot rebuilds.
    const own = {
      ...(i % 5 === 0 && { priority: (i % 3) - 1 }),
      ...(i % 7 === 0 && { delayMs: 1_000 * i }),
    };
    out.push(
      line(
        ++seq,
        subject.task('r', `t${i}`),
        taskCreated({ runId: 'r', stepId, taskId: `t${i}`, ...own }),
      ),
    );
  }
  out.push(
    line(
      ++seq,
      subject.run('r'),
      runSubmitted({ runId: 'r', stepIds: ['a', 'b'], taskCount: 2 * tasks }),
    ),
  );
  for (let i = 0; i < tasks; i += 3) {
    const s = subject.task('r', `t${i}`);
    out.push(line(++seq, s, taskPublished({ attempt: 1, attemptId: `a${i}` }, at(i))));
    if (i % 2 === 0) out.push(line(++seq, s, taskStarted({ attemptId: `a${i}` }, at(i + 1))));
    if (i % 4 === 0) {
      out.push(
        line(++seq, s, taskRequeued({ attemptId: `a${i}`, reason: 'worker-lost' }, at(i + 2))),
      );
    }
  }
  return out.map((l) => JSON.stringify(l));
}

/** A snapshot as format 4 wrote it: no `publishTimes` rows (the end line counts the rest). */
function asFormat4(text: string): string {
  const lines = text.split('\n').filter((l) => !l.startsWith('["publishTimes",'));
  return lines
    .map((l, i) => {
      if (i === 0) return JSON.stringify({ ...(JSON.parse(l) as object), version: 4 });
      if (!l.startsWith('["end",')) return l;
      return JSON.stringify(['end', lines.filter((x) => x !== '').length - 2]);
    })
    .join('\n');
}

/** The dump of a projection restored from a snapshot without publish times. */
const withoutPublishTimes = (p: Projection) => ({ ...dumpProjection(p), publishTimes: [] });

/**
 * A format-3 snapshot of a projection with no expired runs, as format 2 wrote it: no
 * `expiredRuns` count in the header (and no `expiredRun` rows, since there are none).
 */
function asFormat2(text: string): string {
  return asFormat4(text)
    .split('\n')
    .map((l, i) => {
      if (i !== 0) return l;
      const h = JSON.parse(l) as { counts: Record<string, number> };
      expect(h.counts['expiredRuns']).toBe(0);
      expect(h.counts['schedules']).toBe(0);
      delete h.counts['expiredRuns'];
      delete h.counts['schedules'];
      return JSON.stringify({ ...h, version: 2 });
    })
    .join('\n');
}

/**
 * Two runs of `tasks` tasks each on workers that join and go: run `old` finishes, expires
 * and its worker expires; run `live` goes on, its tasks published afterwards.
 */
function expiringLog(tasks: number): string[] {
  const out: unknown[] = [];
  let seq = 0;
  const add = (subj: string, e: Parameters<typeof line>[2]) => out.push(line(++seq, subj, e));
  add(subject.worker('w1'), workerJoined({ workerId: 'w1' }));
  add(subject.worker('w2'), workerJoined({ workerId: 'w2' }));
  for (const runId of ['old', 'live']) {
    add(subject.step(runId, 's1'), stepCreated({ runId, stepId: 's1', taskCount: tasks }));
    for (let i = 0; i < tasks; i++) {
      add(subject.task(runId, `t${i}`), taskCreated({ runId, stepId: 's1', taskId: `t${i}` }));
    }
    add(subject.run(runId), runSubmitted({ runId, stepIds: ['s1'], taskCount: tasks }));
  }
  for (let i = 0; i < tasks; i++) {
    add(subject.task('old', `t${i}`), taskCancelled({ reason: 'operator' }, at(1)));
  }
  add(subject.step('old', 's1'), stepSkipped({ reason: 'cancelled' }, at(2)));
  add(subject.run('old'), runCancelled({ reason: 'operator' }, at(2)));
  add(subject.worker('w1'), workerLeft(at(3)));
  add(
    subject.run('old'),
    runExpired(
      {
        runId: 'old',
        state: 'Cancelled',
        reason: 'operator',
        endedAt: at(2),
        taskCount: tasks,
        tasks: { Cancelled: tasks },
      },
      at(50),
    ),
  );
  add(subject.worker('w1'), workerExpired(at(51)));
  for (let i = 0; i < tasks; i += 2) {
    add(subject.task('live', `t${i}`), taskPublished({ attempt: 1, attemptId: `l${i}` }, at(60)));
  }
  add(subject.worker('w3'), workerJoined({ workerId: 'w3' }, at(61)));
  add(subject.worker('w2'), workerDraining({ reason: 'shutdown' }, at(62)));
  return out.map((l) => JSON.stringify(l));
}

describe('snapshot codec', () => {
  it('knows every field of the projection', () => {
    expect(Object.keys(createProjection()).sort()).toEqual([...PROJECTION_FIELDS].sort());
  });

  it('refuses a projection with a field it does not know', () => {
    const p = { ...createProjection(), extra: new Map() } as unknown as Projection;
    expect(() => captureProjection(p, meta(0))).toThrow(/extra unknown to the snapshot codec/);
  });

  const logs = [
    ...scenarios,
    { name: 'mixed (generated)', lines: mixedLog(60) },
    { name: 'expiring (generated)', lines: expiringLog(20) },
  ];

  describe.each(logs)('$name', ({ lines }) => {
    // Records with their line numbers fixed, as the stream gives them: a JSONL line without
    // a seq takes its line number, which must not restart when the tail is folded alone.
    const records = lines
      .map((l, i) => (l.trim() === '' ? null : parseEventLine(l, i + 1)))
      .filter((r): r is EventRecord => r !== null && !('reason' in r));
    const full = replayRecords(records).projection;

    it('round-trips to an identical projection, order and undefined keys included', () => {
      const { projection, header } = decode(encode(full));
      expect(dumpProjection(projection)).toStrictEqual(dumpProjection(full));
      expect(header.seq).toBe(full.lastSeq);
    });

    it('snapshot at any event + the rest equals the full fold (view and indexes)', () => {
      // Every cut for small logs; about 30 spread evenly over long ones (chaos logs hold
      // thousands of events, and each cut folds the whole log).
      const step = Math.max(1, Math.floor(records.length / 30));
      const cuts = new Set([records.length]);
      for (let cut = 0; cut < records.length; cut += step) cuts.add(cut);
      for (const cut of cuts) {
        const head = replayRecords(records.slice(0, cut)).projection;
        const restored = decode(encode(head)).projection;
        replayRecords(records.slice(cut), restored);
        expect(dumpProjection(restored)).toStrictEqual(dumpProjection(full));
        expect(replayView(restored, [])).toStrictEqual(replayView(full, []));
      }
    });
  });

  it('is a copy: events folded after the capture do not leak into it', () => {
    const lines = mixedLog(30);
    const half = replay(lines.slice(0, 40)).projection;
    const expected = dumpProjection(replay(lines.slice(0, 40)).projection);
    const capture = captureProjection(half, meta(half.lastSeq));
    replay(lines.slice(40), half);
    const text = [...encodeCapture(capture)].join('');
    expect(dumpProjection(decode(text).projection)).toStrictEqual(expected);
  });

  it('reads format 1 (the stepIndex order as [key, order] pairs): an upgrade keeps purged runs', () => {
    const p = replay(mixedLog(30)).projection;
    const v1 = asFormat2(encode(p))
      .split('\n')
      .map((line, i) => {
        if (line === '') return line;
        const row: unknown = JSON.parse(line);
        if (i === 0) return JSON.stringify({ ...(row as object), version: 1 });
        const r = row as unknown[];
        if (r[0] !== 'stepIndex') return line;
        const [tag, key, counts, keys, orders, ...rest] = r as [
          unknown,
          unknown,
          unknown,
          string[],
          number[],
          ...unknown[],
        ];
        return JSON.stringify([tag, key, counts, keys.map((k, j) => [k, orders[j]]), ...rest]);
      })
      .join('\n');
    expect(v1).toContain('"version":1');
    expect(v1).toMatch(/\["stepIndex","[^"]+",\{[^}]*\},\[\["/); // pairs, as format 1 wrote them
    expect(dumpProjection(decode(v1).projection)).toStrictEqual(withoutPublishTimes(p));
  });

  it('reads format 2 (no expired runs): an upgrade keeps purged runs', () => {
    const p = replay(mixedLog(30)).projection;
    const v2 = asFormat2(encode(p));
    expect(v2).toContain('"version":2');
    expect(dumpProjection(decode(v2).projection)).toStrictEqual(withoutPublishTimes(p));
  });

  it('keeps the publish times per tag (format 5); reads format 4 without them', () => {
    const p = replay(mixedLog(30)).projection;
    expect(p.publishTimes.size).toBeGreaterThan(0);
    const text = encode(p);
    expect(text).toMatch(/^\["publishTimes","linux",\[\d+/m);
    expect(dumpProjection(decode(text).projection)).toStrictEqual(dumpProjection(p));
    const v4 = asFormat4(text);
    expect(v4).toContain('"version":4');
    expect(v4).not.toContain('publishTimes');
    expect(dumpProjection(decode(v4).projection)).toStrictEqual(withoutPublishTimes(p));
  });

  it('keeps expired runs and rebuilds the workers in service', () => {
    const { projection: p, skipped } = replay(expiringLog(10));
    expect(skipped).toEqual([]);
    expect([...p.expiredRuns.keys()]).toEqual(['old']);
    expect([...p.workersInService]).toEqual(['w2', 'w3']);
    const text = encode(p);
    expect(text).toContain('"expiredRuns":1');
    expect(text).toMatch(/^\["expiredRun","old",\{"runId":"old","state":"Cancelled"/m);
    expect(text).not.toContain('"workersInService"');
    const restored = decode(text).projection;
    expect(dumpProjection(restored)).toStrictEqual(dumpProjection(p));
    expect(restored.tasks.has('old.t0')).toBe(false);
  });

  it('refuses an expiredRun row whose key is not its run', () => {
    const text = encode(replay(expiringLog(4)).projection).replace(
      '["expiredRun","old"',
      '["expiredRun","other"',
    );
    expect(() => decode(text)).toThrow(/an expiredRun row is malformed/);
  });

  describe('refuses, never returns part of a projection', () => {
    const text = encode(replay(mixedLog(10)).projection);
    const reasonOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (err: unknown) {
        if (err instanceof SnapshotUnusableError) return err.reason;
        throw err;
      }
      return 'accepted';
    };

    it('a truncated snapshot (no end line)', () => {
      const cut = text.split('\n').slice(0, -3).join('\n');
      expect(reasonOf(() => decode(cut))).toBe('corrupt');
    });

    it('a line that is not JSON', () => {
      expect(reasonOf(() => decode(text.replace('"task"', '"task')))).toBe('corrupt');
    });

    it('an unknown row', () => {
      expect(reasonOf(() => decode(text.replace('"stepTasks"', '"other"')))).toBe('corrupt');
    });

    it('another format version or fingerprint', () => {
      const other = text.replace(`"version":${SNAPSHOT_FORMAT}`, '"version":0');
      expect(reasonOf(() => decode(other))).toBe('old-version');
      expect(reasonOf(() => decode(encode(createProjection(), 'other')))).toBe('old-version');
    });

    it('a row count that does not match the end line', () => {
      const lines = text.split('\n');
      lines.splice(2, 1);
      expect(reasonOf(() => decode(lines.join('\n')))).toBe('corrupt');
    });
  });
});
