/**
 * A projection built event by event for reconciler tests and the simulation: `add()` applies
 * an event (it must be accepted) at the next sequence, `emit()` applies a ReconcilerEvent the
 * way the backend would append it. Subjects come from streams/names.ts.
 */
import { applyEvent, createProjection } from '../../actors/projection.js';
import type { Projection } from '../../actors/projection.js';
import type { SonarEvent } from '../../actors/events.js';
import type { ReconcilerEvent } from '../../actors/reconciler/decisions.js';
import type { StepRetry } from '../../actors/task/retry-policy.js';
import { aggregateSubject, names } from '../../streams/names.js';
import {
  T0,
  at,
  runSubmitted,
  stepCreated,
  subject,
  taskCreated,
  taskPublished,
  taskStarted,
  workerJoined,
} from './event-builders.js';

const n = names('sonar');

export class World {
  readonly p: Projection = createProjection();
  private seq = 0;

  /** Applies an event that must be accepted; throws with the machine's reason otherwise. */
  add(subj: string, event: SonarEvent): this {
    const outcome = applyEvent(this.p, {
      seq: ++this.seq,
      subject: subj,
      time: event.time,
      type: event.type,
      data: event.data,
    });
    if (!outcome.ok) throw new Error(`${event.type} on ${subj} refused: ${outcome.reason}`);
    return this;
  }

  /** Applies a reconciler decision as the backend would append it; false when refused. */
  emit(e: ReconcilerEvent, time = T0): boolean {
    return applyEvent(this.p, {
      seq: ++this.seq,
      subject: aggregateSubject(n, e.ref),
      time,
      type: e.type,
      data: e.data,
    }).ok;
  }

  /** A submitted run: steps with their tasks (ids `<stepId>-<i>`), then RunSubmitted. */
  run(
    runId: string,
    steps: {
      id: string;
      tasks: number;
      tags?: string[];
      after?: string[];
      maxConcurrent?: number;
      taskTags?: (i: number) => string[] | undefined;
      priority?: number;
      notBefore?: string;
      delayMs?: number;
      retry?: StepRetry;
      /** A task's own priority and time (TaskCreated fields), when it has any. */
      taskOwn?: (i: number) => { priority?: number; notBefore?: string; delayMs?: number };
    }[],
    opts: { submit?: boolean; time?: string } = {},
  ): this {
    const time = opts.time ?? T0;
    let total = 0;
    for (const s of steps) {
      const tags = s.tags ?? ['linux'];
      this.add(
        subject.step(runId, s.id),
        stepCreated(
          {
            runId,
            stepId: s.id,
            tags,
            after: s.after ?? [],
            taskCount: s.tasks,
            ...(s.maxConcurrent === undefined ? {} : { maxConcurrent: s.maxConcurrent }),
            ...(s.priority !== undefined && { priority: s.priority }),
            ...(s.notBefore !== undefined && { notBefore: s.notBefore }),
            ...(s.delayMs !== undefined && { delayMs: s.delayMs }),
            ...(s.retry !== undefined && { retry: s.retry }),
          },
          time,
        ),
      );
      for (let i = 0; i < s.tasks; i++) {
        const taskId = `${s.id}-${i}`;
        this.add(
          subject.task(runId, taskId),
          taskCreated(
            { runId, stepId: s.id, taskId, tags: s.taskTags?.(i) ?? tags, ...s.taskOwn?.(i) },
            time,
          ),
        );
      }
      total += s.tasks;
    }
    if (opts.submit !== false) {
      this.add(
        subject.run(runId),
        runSubmitted({ runId, stepIds: steps.map((s) => s.id), taskCount: total }, time),
      );
    }
    return this;
  }

  worker(workerId: string, tags: string[] = ['linux'], slots = 2, time = T0): this {
    return this.add(subject.worker(workerId), workerJoined({ workerId, tags, slots }, time));
  }

  /** Publishes `<runId>.<taskId>` as its next attempt `<taskId>-a<n>` on `tag`. */
  publish(key: string, tag = 'linux', time = T0): string {
    const [runId, taskId] = key.split('.') as [string, string];
    const attempt = this.p.tasks.get(key)!.snapshot.context.attempt + 1;
    const attemptId = `${taskId}-a${attempt}`;
    this.add(subject.task(runId, taskId), taskPublished({ attempt, attemptId, tag }, time));
    return attemptId;
  }

  /** Publishes then starts `key` on `workerId`; returns the attemptId. */
  start(key: string, workerId: string, tag = 'linux', time = T0): string {
    const attemptId = this.publish(key, tag, time);
    const [runId, taskId] = key.split('.') as [string, string];
    this.add(subject.task(runId, taskId), taskStarted({ attemptId, workerId }, time));
    return attemptId;
  }

  state(key: string): string {
    return this.p.tasks.get(key)?.snapshot.value ?? this.p.steps.get(key)?.snapshot.value ?? '?';
  }
}

/**
 * A registry entry; `pulseAt` defaults to T0. `running` is left out unless given: a listing
 * is a claim (a task its worker does not list is taken back), which most tests do not make.
 */
export const entry = (
  workerId: string,
  over: Partial<{
    tags: string[];
    slots: number;
    active: boolean;
    pulseAt: string;
    running: string[];
  }> = {},
) => ({
  workerId,
  host: 'h',
  tags: ['linux'],
  slots: 2,
  active: true,
  pulseAt: T0,
  ...over,
});

/** `T0 + seconds` in ms. */
export const ms = (seconds: number): number => Date.parse(at(seconds));
