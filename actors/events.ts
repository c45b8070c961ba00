import type { z } from 'zod';
import { DecodeError, issuesOf, listIssues } from './errors.js';
import { retentionEventData, retentionEventKinds } from './retention/retention.events.js';
import type { RetentionEvent } from './retention/retention.events.js';
import { runEventData } from './run/run.events.js';
import { scheduleEventData } from './schedule/schedule.events.js';
import type { ScheduleEvent } from './schedule/schedule.events.js';
import type { RunEvent } from './run/run.events.js';
import { stepEventData } from './step/step.events.js';
import type { StepEvent } from './step/step.events.js';
import { taskEventData } from './task/task.events.js';
import type { TaskEvent } from './task/task.events.js';
import { systemEventData, workerEventData } from './worker/worker.events.js';
import type { SystemEvent, WorkerEvent } from './worker/worker.events.js';

export type SonarEvent =
  TaskEvent | StepEvent | RunEvent | WorkerEvent | SystemEvent | RetentionEvent | ScheduleEvent;
export type SonarEventType = SonarEvent['type'];
export type EventData<T extends SonarEventType> = Extract<SonarEvent, { type: T }>['data'];

/** The aggregate an event belongs to, named by the third token of its subject. */
export type AggregateKind = 'run' | 'step' | 'task' | 'worker' | 'system' | 'schedule';

const schemas: Record<SonarEventType, z.ZodType> = {
  ...taskEventData,
  ...stepEventData,
  ...runEventData,
  ...workerEventData,
  ...systemEventData,
  ...retentionEventData,
  ...scheduleEventData,
};

const kinds: Record<SonarEventType, AggregateKind> = Object.fromEntries([
  ...Object.keys(taskEventData).map((t) => [t, 'task']),
  ...Object.keys(stepEventData).map((t) => [t, 'step']),
  ...Object.keys(runEventData).map((t) => [t, 'run']),
  ...Object.keys(workerEventData).map((t) => [t, 'worker']),
  ...Object.keys(systemEventData).map((t) => [t, 'system']),
  ...Object.entries(retentionEventKinds),
  ...Object.keys(scheduleEventData).map((t) => [t, 'schedule']),
]) as Record<SonarEventType, AggregateKind>;

export const EVENT_TYPES = Object.keys(schemas) as SonarEventType[];

export const isEventType = (type: unknown): type is SonarEventType =>
  typeof type === 'string' && Object.hasOwn(schemas, type);

export const aggregateKindOf = (type: SonarEventType): AggregateKind => kinds[type];

/** The event versions this reader knows. A new version ships with an upcaster from the old. */
export const EVENT_VERSION = 1;

export type Result<T, E = DecodeError> = { ok: true; value: T } | { ok: false; error: E };

/**
 * Validates a stored event's type and data. A bad event is a Result, never a throw: replay
 * logs it, counts it and goes on (DESIGN.md section 3).
 */
export function decodeEvent(
  type: unknown,
  data: unknown,
  time: string,
  v: number = EVENT_VERSION,
): Result<SonarEvent> {
  if (v !== EVENT_VERSION) {
    return { ok: false, error: new DecodeError(`unsupported event version ${JSON.stringify(v)}`) };
  }
  if (!isEventType(type)) {
    return { ok: false, error: new DecodeError(`unknown event type ${JSON.stringify(type)}`) };
  }
  const parsed = schemas[type].safeParse(data ?? {});
  if (!parsed.success) {
    const { text } = listIssues(issuesOf(parsed.error, [], 'data'));
    return { ok: false, error: new DecodeError(`${type}: ${text}`) };
  }
  return { ok: true, value: { type, data: parsed.data, time } as SonarEvent };
}

/** Where an event lives, parsed from `<prefix>.events.<kind>.<ids...>`. */
export interface AggregateRef {
  kind: AggregateKind;
  /**
   * Projection key: `<runId>.<taskId>`, `<runId>.<stepId>`, `<runId>`, `<workerId>`, `<name>`
   * (system and schedule).
   */
  key: string;
}

const SUBJECT_RE =
  /^[^.]+\.events\.(?:(task|step)\.([A-Za-z0-9_-]{1,64}\.[A-Za-z0-9_-]{1,64})|(run|worker|system|schedule)\.([A-Za-z0-9_-]{1,64}))$/;

/** Parses an event subject; the prefix is any single token. Null when it is not one. */
export function parseEventSubject(subject: string): AggregateRef | null {
  // One regex instead of split + a test per token: this runs once per replayed event.
  const m = SUBJECT_RE.exec(subject);
  if (!m) return null;
  return m[1] !== undefined
    ? { kind: m[1] as AggregateKind, key: m[2]! }
    : { kind: m[3] as AggregateKind, key: m[4]! };
}
