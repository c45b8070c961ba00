import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import { validateRunFile } from '../../src/run-file.js';
import { resolveRetry } from '../../src/run-file-placement.js';

const limits = { maxInputBytes: Infinity };
const run = (step: Record<string, unknown>, task: Record<string, unknown> = {}) => ({
  runId: 'r1',
  steps: [{ id: 's1', tags: ['linux'], ...step, tasks: [{ id: 't1', ...task }] }],
});

function problems(raw: unknown): string {
  try {
    validateRunFile(raw, limits);
  } catch (err: unknown) {
    if (err instanceof ValidationError) return err.message;
    throw err;
  }
  throw new Error('the run file was accepted');
}

describe('run file: placement fields', () => {
  it('takes priority, notBefore or delay on steps and tasks, and a retry policy', () => {
    const parsed = validateRunFile(
      run(
        {
          priority: 10,
          delay: '1h30m',
          retry: { maxAttempts: 5, backoff: 'fixed', initial: '2s', max: 2000, jitter: 0.2 },
        },
        { priority: -100, notBefore: '2026-01-01T02:00:00+01:00' },
      ),
      limits,
    );
    expect(parsed.steps[0]).toMatchObject({
      priority: 10,
      delay: 5_400_000,
      retry: { maxAttempts: 5, backoff: 'fixed', initial: 2_000, max: 2_000, jitter: 0.2 },
    });
    expect(parsed.steps[0]!.tasks[0]).toMatchObject({
      priority: -100,
      notBefore: '2026-01-01T02:00:00+01:00',
    });
  });

  it('refuses a priority out of range or not whole, naming the field and the bound', () => {
    const message = problems(run({ priority: 101 }, { priority: 1.5 }));
    expect(message).toMatch(/'steps.0.priority' must be 100 or less, got 101/);
    expect(message).toMatch(
      /'steps.0.tasks.0.priority' must be a whole number from -100 to 100, got 1.5/,
    );
    expect(problems(run({ priority: -101 }))).toMatch(
      /'steps.0.priority' must be -100 or more, got -101/,
    );
  });

  it('refuses a notBefore without a zone and a delay that is not a duration', () => {
    const message = problems(run({ notBefore: '2026-01-01 02:00' }, { delay: '5x' }));
    expect(message).toMatch(
      /'steps.0.notBefore' must be an ISO-8601 time with a zone \(e.g. [^)]*\), got "2026-01-01 02:00"/,
    );
    expect(message).toMatch(/'steps.0.tasks.0.delay' "5x" is not a duration \(e.g. 5s\)/);
    expect(problems(run({ delay: '400d' }))).toMatch(/'steps.0.delay' "400d" is more than 366d/);
  });

  it('refuses notBefore together with delay, on a step and on a task', () => {
    const message = problems(
      run(
        { notBefore: '2026-01-01T00:00:00Z', delay: '1m' },
        { notBefore: '2026-01-01T00:00:00Z', delay: 5 },
      ),
    );
    expect(message).toMatch(/'steps.0.delay' cannot be given with notBefore/);
    expect(message).toMatch(/'steps.0.tasks.0.delay' cannot be given with notBefore/);
  });

  it('refuses a bad retry policy, field by field, and a max below its initial', () => {
    const message = problems(
      run({ retry: { backoff: 'linear', jitter: 2, maxAttempts: 0, initial: '1m', max: '10s' } }),
    );
    expect(message).toMatch(
      /'steps.0.retry.backoff' must be 'fixed' or 'exponential', got "linear"/,
    );
    expect(message).toMatch(/'steps.0.retry.jitter' must be from 0 to 1, got 2/);
    expect(message).toMatch(
      /'steps.0.retry.maxAttempts' must be a whole number from 1 to 100, got 0/,
    );
    expect(problems(run({ retry: { initial: '1m', max: '10s' } }))).toMatch(
      /'steps.0.retry.max' is 10s, less than retry.initial \(1m\)/,
    );
    expect(problems(run({ retry: { initial: '10m' } }))).toMatch(
      /'steps.0.retry.max' is 5m \(the default\), less than retry.initial \(10m\)/,
    );
    expect(problems(run({ retry: { retries: 3 } }))).toMatch(/retries/);
  });

  it("resolves a step's retry with today's defaults for what it leaves out", () => {
    expect(resolveRetry({})).toEqual({
      maxAttempts: 3,
      backoff: 'exponential',
      initialMs: 1_000,
      maxMs: 300_000,
      jitter: 0,
    });
    expect(resolveRetry({ backoff: 'fixed', initial: 10 })).toMatchObject({
      backoff: 'fixed',
      initialMs: 10,
    });
  });
});
