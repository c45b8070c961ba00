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
} from '../../src/backend/snapshot-codec.js';
import {
  at,
  line,
  runSubmitted,
  stepCreated,
  subject,
  taskCreated,
  taskPublished,
  taskRequeued,
  taskStarted,
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

/** Tasks requeued and retried, interleaved across two steps: every index gets entries. */
function mixedLog(tasks: number): string[] {
  const out: unknown[] = [
    line(1, subject.step('r', 'a'), stepCreated({ runId: 'r', stepId: 'a', taskCount: tasks })),
    line(2, subject.step('r', 'b'), stepCreated({ runId: 'r', stepId: 'b', taskCount: tasks })),
  ];
  let seq = 2;
  for (let i = 0; i < tasks; i++) {
    const stepId = i % 2 === 0 ? 'a' : 'b';
    out.push(
      line(++seq, subject.task('r', `t${i}`), taskCreated({ runId: 'r', stepId, taskId: `t${i}` })),
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

describe('snapshot codec', () => {
  it('knows every field of the projection', () => {
    expect(Object.keys(createProjection()).sort()).toEqual([...PROJECTION_FIELDS].sort());
  });

  it('refuses a projection with a field it does not know', () => {
    const p = { ...createProjection(), extra: new Map() } as unknown as Projection;
    expect(() => captureProjection(p, meta(0))).toThrow(/extra unknown to the snapshot codec/);
  });

  const logs = [...scenarios, { name: 'mixed (generated)', lines: mixedLog(60) }];

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
    const v1 = encode(p)
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
    expect(dumpProjection(decode(v1).projection)).toStrictEqual(dumpProjection(p));
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
