/**
 * The run file's placement fields (docs/run-file.md): `priority`, `notBefore` or `delay` on a
 * step or a task, and a step's `retry` policy. Schemas for the fields one by one, and the
 * checks across fields (`placementIssues`), which the client and the backend both run.
 *
 * @module
 */
import { z } from 'zod';
import type { Issue } from '../actors/errors.js';
import { PRIORITY_MAX, PRIORITY_MIN } from '../actors/priority.js';
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_POLICY } from '../actors/task/retry-policy.js';
import type { StepRetry } from '../actors/task/retry-policy.js';
import { formatDuration, parseDuration } from './duration.js';

/** A delay or a wait this long is a schedule's job, and would outrun the time line. */
const MAX_DURATION_MS = 366 * 86_400_000;

/** `'30s'`, `'1h30m'`, or a number of milliseconds, to milliseconds. */
const duration = z.union([z.number(), z.string()]).transform((value, ctx) => {
  try {
    const ms = parseDuration(value);
    if (ms <= MAX_DURATION_MS) return ms;
    ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)} is more than 366d` });
  } catch (err: unknown) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
  }
  return z.NEVER;
});

/** A refusal that names the value it was given, as every run-file error does. */
const got =
  (message: string) =>
  (issue: { input?: unknown }): string =>
    `${message}, got ${JSON.stringify(issue.input) ?? String(issue.input)}`;

export const priorityField = z
  .number({ error: got('must be a number') })
  .int({ error: got(`must be a whole number from ${PRIORITY_MIN} to ${PRIORITY_MAX}`) })
  .min(PRIORITY_MIN, { error: got(`must be ${PRIORITY_MIN} or more`) })
  .max(PRIORITY_MAX, { error: got(`must be ${PRIORITY_MAX} or less`) });

export const notBeforeField = z.iso.datetime({
  offset: true,
  error: got('must be an ISO-8601 time with a zone (e.g. 2026-01-01T02:00:00Z)'),
});

export const delayField = duration;

export const retryField = z.strictObject({
  maxAttempts: z
    .number({ error: got('must be a whole number from 1 to 100') })
    .int({ error: got('must be a whole number from 1 to 100') })
    .min(1, { error: got('must be a whole number from 1 to 100') })
    .max(100, { error: got('must be a whole number from 1 to 100') })
    .optional(),
  backoff: z
    .enum(['fixed', 'exponential'], { error: got("must be 'fixed' or 'exponential'") })
    .optional(),
  initial: duration.optional(),
  max: duration.optional(),
  jitter: z
    .number({ error: got('must be from 0 to 1') })
    .min(0, { error: got('must be from 0 to 1') })
    .max(1, { error: got('must be from 0 to 1') })
    .optional(),
});
export type RetryInRunFile = z.output<typeof retryField>;

/** A step's `retry` with every default filled in, as `StepCreated` records it. */
export function resolveRetry(r: RetryInRunFile): StepRetry {
  return {
    maxAttempts: r.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    backoff: r.backoff ?? DEFAULT_RETRY_POLICY.backoff,
    initialMs: r.initial ?? DEFAULT_RETRY_POLICY.initialMs,
    maxMs: r.max ?? DEFAULT_RETRY_POLICY.maxMs,
    jitter: r.jitter ?? DEFAULT_RETRY_POLICY.jitter,
  };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The problems across a step's or task's placement fields, read from the raw item (whatever
 * else is wrong with it): `notBefore` with `delay`, and a `retry` whose `max` is below its
 * `initial` (defaults included). Field by field problems are the schema's.
 */
export function placementIssues(item: unknown, path: string): Issue[] {
  if (!isRecord(item)) return [];
  const issues: Issue[] = [];
  if (item['notBefore'] !== undefined && item['delay'] !== undefined) {
    issues.push({ path: `${path}.delay`, message: 'cannot be given with notBefore: choose one' });
  }
  const retry = item['retry'] === undefined ? null : retryField.safeParse(item['retry']);
  if (retry?.success) {
    const { initialMs, maxMs } = resolveRetry(retry.data);
    if (maxMs < initialMs) {
      issues.push({
        path: `${path}.retry.max`,
        message: `is ${formatDuration(maxMs)}${retry.data.max === undefined ? ' (the default)' : ''}, less than retry.initial (${formatDuration(initialMs)})`,
      });
    }
  }
  return issues;
}
