import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import { chunkTasks } from '../../src/client/client.js';
import {
  canonicalJson,
  runFileHash,
  stepGraphIssues,
  validateRunFile,
} from '../../src/run-file.js';

const limits = { maxInputBytes: 1024 };

interface Task {
  id: string;
  input?: unknown;
  [k: string]: unknown;
}
const good = (): {
  runId: string;
  steps: { id: string; tasks: Task[]; [k: string]: unknown }[];
} => ({
  runId: 'scan-42',
  steps: [
    {
      id: 'crawl',
      tags: ['linux'],
      maxConcurrent: 10,
      after: [],
      output: 'json',
      timeoutMs: 600_000,
      tasks: [
        { id: 't1', command: ['sh', '-c', 'echo hi'], input: {}, maxAttempts: 3, tags: ['x'] },
      ],
    },
    { id: 'report', tags: ['linux'], after: ['crawl'], tasks: [{ id: 't2' }] },
  ],
});

function refusal(raw: unknown): ValidationError {
  try {
    validateRunFile(raw, limits);
  } catch (err: unknown) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error('the run file was accepted');
}

describe('validateRunFile', () => {
  it('accepts the DESIGN.md example and fills defaults', () => {
    const parsed = validateRunFile(good(), limits);
    expect(parsed.steps[1]).toMatchObject({ after: ['crawl'], output: 'bytes' });
  });

  it('lists every problem at once: bad ids, unknown fields, no tags, cycles, unknown steps', () => {
    const raw = {
      runId: 'bad id!',
      colour: 'red',
      steps: [
        { id: 'a', tags: [], after: ['b'], tasks: [{ id: 't1', extra: true }] },
        { id: 'b', tags: ['x'], after: ['a', 'ghost'], tasks: [{ id: 't1' }] },
        { id: 'a', tags: ['x'], tasks: [] },
      ],
    };
    const err = refusal(raw);
    const paths = err.issues.map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'runId',
        '(root)',
        'steps.0.tags',
        'steps.0.tasks.0',
        'steps.1.after.1',
        'steps.2.id',
        'steps.1.tasks.0.id',
        'steps',
      ]),
    );
    expect(err.message).toMatch(/^run file refused \(\d+ problems\): /);
    expect(err.message).toMatch(/'runId' must match/);
    expect(err.message).toMatch(/colour/);
    expect(err.message).toMatch(/'steps.0.tags' needs at least one tag/);
    expect(err.message).toMatch(/extra/);
    expect(err.message).toMatch(/'steps.1.after.1' names unknown step "ghost"/);
    expect(err.message).toMatch(/cycle in 'after': a -> b -> a/);
    expect(err.message).toMatch(/duplicate task id "t1" \(also steps.0.tasks.0\)/);
    expect(err.message).toMatch(/duplicate step id "a"/);
  });

  it('refuses an input over SONAR_MAX_INPUT, naming the limit', () => {
    const raw = good();
    raw.steps[0]!.tasks[0]!.input = { blob: 'x'.repeat(2000) };
    expect(refusal(raw).message).toMatch(
      /'steps.0.tasks.0.input' is \d+ bytes of JSON, over SONAR_MAX_INPUT \(1KiB\): pass a reference/,
    );
  });

  it('refuses a file with no steps and a step that follows itself', () => {
    expect(refusal({ runId: 'r', steps: [] }).issues[0]).toMatchObject({ path: 'steps' });
    expect(stepGraphIssues([{ id: 'a', after: ['a'] }])).toEqual([
      { path: 'steps.0.after.0', message: 'a step cannot follow itself' },
    ]);
  });

  it('finds a longer cycle once', () => {
    const issues = stepGraphIssues([
      { id: 'a', after: ['c'] },
      { id: 'b', after: ['a'] },
      { id: 'c', after: ['b'] },
    ]);
    expect(issues).toHaveLength(1);
    expect(issues[0]!.message).toMatch(/cycle in 'after': a -> c -> b -> a/);
  });
});

describe('bounded checks: no recursion on what a file may hold', () => {
  /** Linear, but 100k steps take seconds on a loaded machine: the timeout is not the point. */
  const SLOW_MS = 60_000;
  /** `[[[...]]]`, `levels` deep, built without recursion (JSON.parse is iterative). */
  const nested = (levels: number): unknown => JSON.parse('['.repeat(levels) + ']'.repeat(levels));
  /**
   * `s0` after `s1` after ... after `s<length-1>`: listed first, the head makes a depth-first
   * walk go down the whole chain at once (recursion overflowed a few thousand steps down).
   */
  const chain = (length: number, closed = false) =>
    Array.from({ length }, (_, i) => ({
      id: `s${i}`,
      tags: ['a'],
      after: i === length - 1 ? (closed ? ['s0'] : []) : [`s${i + 1}`],
      tasks: [],
    }));

  it(
    'walks a 100k-long after chain without overflowing, and accepts it',
    () => {
      expect(stepGraphIssues(chain(100_000))).toEqual([]);
      const file = { runId: 'r', steps: chain(100_000) };
      expect(validateRunFile(file, limits).steps).toHaveLength(100_000);
    },
    SLOW_MS,
  );

  it(
    'finds the cycle that closes a 100k-long chain, shown by its ends',
    () => {
      const issues = stepGraphIssues(chain(100_000, true));
      expect(issues).toHaveLength(1);
      expect(issues[0]!.message).toMatch(
        /^cycle in 'after': s0 -> s1 -> .* -> \.\.\. \(99989 more steps\) -> .* -> s99999 -> s0$/,
      );
    },
    SLOW_MS,
  );

  it(
    'lists at most 100 of 100k problems, saying how many there are',
    () => {
      const steps = Array.from({ length: 100_000 }, (_, i) => ({
        id: `s${i}`,
        tags: ['a'],
        after: ['nope'],
        tasks: [],
      }));
      const err = refusal({ runId: 'r', steps });
      expect(err.issues).toHaveLength(100);
      expect(err.message).toMatch(/^run file refused \(100000 problems\): .*; and 99900 more$/);
    },
    SLOW_MS,
  );

  it(
    'refuses a 100k-deep input by its path, without serializing it',
    () => {
      const file = good();
      file.steps[0]!.tasks[0]!.input = { ok: nested(100_000) };
      const err = refusal(file);
      expect(err.issues).toEqual([
        {
          path: 'steps.0.tasks.0.input',
          message: expect.stringMatching(/more than 64 levels deep/) as unknown,
        },
      ]);
    },
    SLOW_MS,
  );

  it(
    'accepts an input exactly 64 levels deep and refuses 65',
    () => {
      const file = good();
      file.steps[0]!.tasks[0]!.input = nested(64);
      expect(() => validateRunFile(file, { maxInputBytes: Infinity })).not.toThrow();
      file.steps[0]!.tasks[0]!.input = { a: nested(64) };
      expect(refusal(file).issues[0]!.path).toBe('steps.0.tasks.0.input');
    },
    SLOW_MS,
  );
});

describe('runFileHash', () => {
  it('is the same for the same content in any key order, different otherwise', () => {
    const a = validateRunFile(good(), limits);
    const reordered = JSON.parse(canonicalJson(good())) as unknown;
    expect(runFileHash(validateRunFile(reordered, limits))).toBe(runFileHash(a));
    const changed = good();
    changed.steps[1]!.tasks[0]!.id = 't3';
    expect(runFileHash(validateRunFile(changed, limits))).not.toBe(runFileHash(a));
  });
});

describe('chunkTasks', () => {
  it('cuts at 1,000 tasks and at 512 KiB', () => {
    const many = Array.from({ length: 2500 }, (_, i) => ({ id: `t${i}` }));
    expect(chunkTasks(many).map((c) => c.length)).toEqual([1000, 1000, 500]);
    const big = Array.from({ length: 10 }, (_, i) => ({ id: `t${i}`, input: 'x'.repeat(200_000) }));
    const chunks = chunkTasks(big);
    expect(chunks.map((c) => c.length)).toEqual([2, 2, 2, 2, 2]);
    for (const c of chunks) expect(JSON.stringify(c).length).toBeLessThan(512 * 1024);
  });
});
