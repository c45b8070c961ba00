/**
 * Builders for every stored event (DESIGN.md section 3), with realistic defaults and
 * overrides: `taskPublished({ attempt: 2 })` is attempt 2 of `r1.t1` with attemptId `a2`.
 * Each returns the machine's `{ type, data, time }` with the data as the decoder would give it
 * (defaults filled), so tests can hand it to `transition()` or `applyDecoded()` directly.
 * `line()` and `jsonl()` turn events into the DESIGN.md section 8 JSONL line format.
 */
import type {
  ReconcilerElected,
  RunCancelled,
  RunExpired,
  RunFailed,
  RunSubmitted,
  RunSucceeded,
  ScheduleCreated,
  ScheduleDeleted,
  ScheduleRunRefused,
  ScheduleFired,
  SchedulePaused,
  ScheduleResumed,
  SonarEvent,
  StepBlocked,
  StepCreated,
  StepFailed,
  StepReady,
  StepServed,
  StepSkipped,
  StepStarved,
  StepSucceeded,
  TaskAttemptFailed,
  TaskCancelled,
  TaskCreated,
  TaskDead,
  TaskFinalizeRetried,
  TaskFinalized,
  TaskPoisoned,
  TaskPublished,
  TaskRequeued,
  TaskResultAccepted,
  TaskStarted,
  WorkerDraining,
  WorkerExpired,
  WorkerJoined,
  WorkerLeft,
  WorkerLost,
} from '../../actors/index.js';
import { names } from '../../streams/names.js';

/** The time of every event unless overridden: the server clock at the start of a scenario. */
export const T0 = '2026-01-01T00:00:00.000Z';

/** `T0` plus `seconds`, as the ISO-8601 server time of a JetStream message. */
export const at = (seconds: number): string =>
  new Date(Date.parse(T0) + seconds * 1000).toISOString();

/** A sha256-looking hex digest, distinct per seed (the hash of an attempt token). */
export const hexHash = (seed: string): string => {
  let hex = '';
  let h = 0x811c9dc5;
  while (hex.length < 64) {
    for (const ch of `${seed}:${hex.length}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
    hex += (h >>> 0).toString(16).padStart(8, '0');
  }
  return hex.slice(0, 64);
};

type Over<E extends SonarEvent> = Partial<E['data']>;

function ev<E extends SonarEvent>(type: E['type'], data: E['data'], time: string): E {
  return { type, data, time } as E;
}

// ---- task ---------------------------------------------------------------------------------

export const taskCreated = (over: Over<TaskCreated> = {}, time = T0): TaskCreated =>
  ev<TaskCreated>(
    'TaskCreated',
    { runId: 'r1', stepId: 's1', taskId: 't1', tags: ['linux'], maxAttempts: 3, ...over },
    time,
  );

/** attemptId defaults to `a<attempt>`, so `taskPublished({ attempt: 2 })` is attempt `a2`. */
export const taskPublished = (over: Over<TaskPublished> = {}, time = T0): TaskPublished => {
  const attempt = over.attempt ?? 1;
  const attemptId = over.attemptId ?? `a${attempt}`;
  return ev<TaskPublished>(
    'TaskPublished',
    { attempt, attemptId, tokenHash: hexHash(attemptId), tag: 'linux', ...over },
    time,
  );
};

export const taskStarted = (over: Over<TaskStarted> = {}, time = T0): TaskStarted =>
  ev<TaskStarted>('TaskStarted', { attemptId: 'a1', workerId: 'w1', ...over }, time);

/** Defaults to a counted `worker-lost` recovery, the first one. */
export const taskRequeued = (over: Over<TaskRequeued> = {}, time = T0): TaskRequeued =>
  ev<TaskRequeued>(
    'TaskRequeued',
    { attemptId: 'a1', reason: 'worker-lost', recoveries: 1, ...over },
    time,
  );

export const taskAttemptFailed = (
  over: Over<TaskAttemptFailed> = {},
  time = T0,
): TaskAttemptFailed =>
  ev<TaskAttemptFailed>(
    'TaskAttemptFailed',
    {
      attemptId: 'a1',
      workerId: 'w1',
      exitCode: 1,
      error: 'exit code 1',
      retryable: true,
      ...over,
    },
    time,
  );

export const taskResultAccepted = (
  over: Over<TaskResultAccepted> = {},
  time = T0,
): TaskResultAccepted =>
  ev<TaskResultAccepted>(
    'TaskResultAccepted',
    {
      attemptId: 'a1',
      workerId: 'w1',
      outputRef: 'inline',
      outputBytes: 11,
      outputInline: 'eyJvayI6dHJ1ZX0=',
      ...over,
    },
    time,
  );

export const taskFinalized = (over: Over<TaskFinalized> = {}, time = T0): TaskFinalized =>
  ev<TaskFinalized>('TaskFinalized', { attemptId: 'a1', resultKey: 'r1.t1', ...over }, time);

export const taskPoisoned = (over: Over<TaskPoisoned> = {}, time = T0): TaskPoisoned =>
  ev<TaskPoisoned>(
    'TaskPoisoned',
    { attemptId: 'a1', error: 'output is not valid JSON', deliveries: 6, ...over },
    time,
  );

export const taskFinalizeRetried = (
  over: Over<TaskFinalizeRetried> = {},
  time = T0,
): TaskFinalizeRetried =>
  ev<TaskFinalizeRetried>(
    'TaskFinalizeRetried',
    { attemptId: 'a1', by: 'operator', ...over },
    time,
  );

export const taskDead = (over: Over<TaskDead> = {}, time = T0): TaskDead =>
  ev<TaskDead>('TaskDead', { reason: 'recovery-limit', recoveries: 3, ...over }, time);

export const taskCancelled = (over: Over<TaskCancelled> = {}, time = T0): TaskCancelled =>
  ev<TaskCancelled>('TaskCancelled', { reason: 'operator', ...over }, time);

// ---- step ---------------------------------------------------------------------------------

export const stepCreated = (over: Over<StepCreated> = {}, time = T0): StepCreated =>
  ev<StepCreated>(
    'StepCreated',
    {
      runId: 'r1',
      stepId: 's1',
      tags: ['linux'],
      after: [],
      taskCount: 1,
      output: 'bytes',
      ...over,
    },
    time,
  );

export const stepReady = (time = T0): StepReady => ev<StepReady>('StepReady', {}, time);

export const stepStarved = (over: Over<StepStarved> = {}, time = T0): StepStarved =>
  ev<StepStarved>('StepStarved', { tags: ['linux'], ...over }, time);

export const stepServed = (time = T0): StepServed => ev<StepServed>('StepServed', {}, time);

export const stepBlocked = (over: Over<StepBlocked> = {}, time = T0): StepBlocked =>
  ev<StepBlocked>('StepBlocked', { taskIds: ['t1'], ...over }, time);

export const stepSucceeded = (time = T0): StepSucceeded =>
  ev<StepSucceeded>('StepSucceeded', {}, time);

export const stepFailed = (over: Over<StepFailed> = {}, time = T0): StepFailed =>
  ev<StepFailed>('StepFailed', { reason: 'task failed', taskIds: ['t1'], ...over }, time);

export const stepSkipped = (over: Over<StepSkipped> = {}, time = T0): StepSkipped =>
  ev<StepSkipped>('StepSkipped', { reason: 'step s0 failed', ...over }, time);

// ---- run ----------------------------------------------------------------------------------

export const runSubmitted = (over: Over<RunSubmitted> = {}, time = T0): RunSubmitted =>
  ev<RunSubmitted>('RunSubmitted', { runId: 'r1', stepIds: ['s1'], taskCount: 1, ...over }, time);

export const runSucceeded = (time = T0): RunSucceeded => ev<RunSucceeded>('RunSucceeded', {}, time);

export const runFailed = (over: Over<RunFailed> = {}, time = T0): RunFailed =>
  ev<RunFailed>('RunFailed', { reason: 'step s1 failed', ...over }, time);

export const runCancelled = (over: Over<RunCancelled> = {}, time = T0): RunCancelled =>
  ev<RunCancelled>('RunCancelled', { reason: 'operator', ...over }, time);

// ---- retention ----------------------------------------------------------------------------

/** `RunExpired` of a one-task run `r1` that succeeded at T0 + 10 s. */
export const runExpired = (over: Over<RunExpired> = {}, time = T0): RunExpired =>
  ev<RunExpired>(
    'RunExpired',
    {
      runId: 'r1',
      state: 'Succeeded',
      reason: null,
      submittedAt: T0,
      endedAt: at(10),
      taskCount: 1,
      tasks: { Succeeded: 1 },
      ...over,
    },
    time,
  );

export const workerExpired = (time = T0): WorkerExpired =>
  ev<WorkerExpired>('WorkerExpired', {}, time);

// ---- worker and system --------------------------------------------------------------------

export const workerJoined = (over: Over<WorkerJoined> = {}, time = T0): WorkerJoined =>
  ev<WorkerJoined>(
    'WorkerJoined',
    { workerId: 'w1', host: 'host-1', tags: ['linux'], slots: 2, ...over },
    time,
  );

export const workerDraining = (over: Over<WorkerDraining> = {}, time = T0): WorkerDraining =>
  ev<WorkerDraining>('WorkerDraining', { reason: 'shutdown', ...over }, time);

export const workerLeft = (time = T0): WorkerLeft => ev<WorkerLeft>('WorkerLeft', {}, time);

export const workerLost = (over: Over<WorkerLost> = {}, time = T0): WorkerLost =>
  ev<WorkerLost>('WorkerLost', { lastPulseAt: T0, reason: 'expired', ...over }, time);

export const reconcilerElected = (
  over: Over<ReconcilerElected> = {},
  time = T0,
): ReconcilerElected => ev<ReconcilerElected>('ReconcilerElected', { nodeId: 'n1', ...over }, time);

// ---- schedule -----------------------------------------------------------------------------

/** Schedule `nightly`: every 2 s by default, a one-task run, the decoder's defaults. */
export const scheduleCreated = (over: Over<ScheduleCreated> = {}, time = T0): ScheduleCreated =>
  ev<ScheduleCreated>(
    'ScheduleCreated',
    {
      name: 'nightly',
      ...(over.cron === undefined && { everyMs: 2000 }),
      run: {
        steps: [{ id: 's1', tags: ['linux'], after: [], output: 'bytes', tasks: [{ id: 't1' }] }],
      },
      overlap: 'skip',
      catchUp: 'last',
      catchUpLimit: 10,
      missedAfterMs: 60_000,
      ...over,
    },
    time,
  );

/** A due fire of `nightly` at `dueAt` (its run id derived the way the firer derives it). */
export const scheduleFired = (over: Over<ScheduleFired> = {}, time = T0): ScheduleFired => {
  const dueAt = over.dueAt ?? at(2);
  const compact = dueAt.replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  return ev<ScheduleFired>(
    'ScheduleFired',
    { dueAt, runId: `nightly-${compact}`, trigger: 'due', missed: 0, ...over },
    time,
  );
};

export const schedulePaused = (time = T0): SchedulePaused =>
  ev<SchedulePaused>('SchedulePaused', {}, time);
export const scheduleResumed = (time = T0): ScheduleResumed =>
  ev<ScheduleResumed>('ScheduleResumed', {}, time);
export const scheduleDeleted = (time = T0): ScheduleDeleted =>
  ev<ScheduleDeleted>('ScheduleDeleted', {}, time);
export const scheduleRunRefused = (
  over: Over<ScheduleRunRefused> = {},
  time = T0,
): ScheduleRunRefused =>
  ev<ScheduleRunRefused>(
    'ScheduleRunRefused',
    { runId: 'nightly-20260101T000002Z', code: 'validation', message: 'refused', ...over },
    time,
  );

// ---- subjects and JSONL lines -------------------------------------------------------------

const subjects = names('sonar').subjects;

/** Aggregate subjects with the default prefix (built by streams/names.ts). */
export const subject = {
  run: (runId = 'r1'): string => subjects.run(runId),
  step: (runId = 'r1', stepId = 's1'): string => subjects.step(runId, stepId),
  task: (runId = 'r1', taskId = 't1'): string => subjects.task(runId, taskId),
  worker: (workerId = 'w1'): string => subjects.worker(workerId),
  system: (name = 'reconciler'): string => subjects.system(name),
  schedule: (name = 'nightly'): string => subjects.schedule(name),
};

/** One line of the DESIGN.md section 8 event log. */
export interface EventLine {
  seq: number;
  subject: string;
  time: string;
  type: string;
  data: unknown;
}

export const line = (seq: number, subj: string, event: SonarEvent): EventLine => ({
  seq,
  subject: subj,
  time: event.time,
  type: event.type,
  data: event.data,
});

/** Lines as JSONL text lines, ready for `replay()`. */
export const jsonl = (lines: readonly unknown[]): string[] => lines.map((l) => JSON.stringify(l));
