import type { EventRecord, TaskSnapshot } from '../../../../actors/projection.js';
import { publicEvent } from './public-event.js';
import type { PublicEvent } from './public-event.js';

/** One publish of the task and what became of it, read off its events. */
export interface AttemptView {
  attempt: number;
  attemptId: string;
  tag: string | null;
  publishedAt: string;
  workerId: string | null;
  startedAt: string | null;
  /** The last thing that happened to this attempt (`TaskFinalized`, `TaskRequeued`, ...). */
  outcome: string | null;
  outcomeAt: string | null;
  /** A requeue's reason, a failure's or poison's error. */
  detail: string | null;
}

export interface TaskView {
  task: string;
  runId: string;
  stepId: string;
  taskId: string;
  state: string;
  tags: string[];
  command: string[] | null;
  maxAttempts: number;
  attempt: number;
  attemptId: string | null;
  tag: string | null;
  workerId: string | null;
  failures: number;
  recoveries: number;
  retryAt: string | null;
  output: { ref: string; bytes: number } | null;
  resultKey: string | null;
  error: string | null;
  finalizeRound: number;
  attempts: AttemptView[];
  /** `TaskRequeued` and `TaskDead`, with their reasons. */
  recoveryLog: { time: string; type: string; reason: string; recoveries: number }[];
  /** Every event of the task's subject, sanitized (no token hash, no input, no inline output). */
  history: PublicEvent[];
}

/** The Task page's data: the projection's current state and the subject's full history. */
export function buildTaskView(key: string, snap: TaskSnapshot, records: EventRecord[]): TaskView {
  const c = snap.context;
  const history = records.map(publicEvent);
  const attempts: AttemptView[] = [];
  const recoveryLog: TaskView['recoveryLog'] = [];
  for (const e of history) {
    const d = e.data;
    const str = (k: string): string | null => (typeof d[k] === 'string' ? d[k] : null);
    if (e.type === 'TaskPublished') {
      attempts.push({
        attempt: typeof d['attempt'] === 'number' ? d['attempt'] : attempts.length + 1,
        attemptId: str('attemptId') ?? '',
        tag: str('tag'),
        publishedAt: e.time,
        workerId: null,
        startedAt: null,
        outcome: null,
        outcomeAt: null,
        detail: null,
      });
      continue;
    }
    if (e.type === 'TaskRequeued' || e.type === 'TaskDead') {
      recoveryLog.push({
        time: e.time,
        type: e.type,
        reason: str('reason') ?? '',
        recoveries: typeof d['recoveries'] === 'number' ? d['recoveries'] : 0,
      });
    }
    const current = attempts[attempts.length - 1];
    const id = str('attemptId');
    if (!current || (id !== null && id !== current.attemptId)) continue;
    // An event with no attemptId (TaskCancelled, TaskDead) ends only an attempt still open.
    if (id === null && current.outcome !== null) continue;
    if (e.type === 'TaskStarted') {
      current.workerId = str('workerId');
      current.startedAt = e.time;
      continue;
    }
    if (e.type === 'TaskCreated') continue;
    current.outcome = e.type;
    current.outcomeAt = e.time;
    current.detail =
      str('error') ?? str('reason') ?? (e.type === 'TaskResultAccepted' ? str('outputRef') : null);
  }
  return {
    task: key,
    runId: c.spec.runId,
    stepId: c.spec.stepId,
    taskId: c.spec.taskId,
    state: snap.value,
    tags: c.spec.tags,
    command: c.spec.command ?? null,
    maxAttempts: c.spec.maxAttempts,
    attempt: c.attempt,
    attemptId: c.attemptId,
    tag: c.tag,
    workerId: c.workerId,
    failures: c.failures,
    recoveries: c.recoveries,
    retryAt: c.retryAt,
    output: c.output ? { ref: c.output.ref, bytes: c.output.bytes } : null,
    resultKey: c.resultKey,
    error: c.error,
    finalizeRound: c.finalizeRound,
    attempts,
    recoveryLog,
    history,
  };
}
