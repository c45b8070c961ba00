import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import { chunkTasks } from '../../src/client/client.js';
import {
  canonicalJson,
  runFileHash,
  stepGraphIssues,
  validateRunFile,
} from '../../src/client/run-file.js';

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
