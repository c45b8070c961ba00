import { ErrorCode, IllegalTransitionError, SonarError } from '../../../../actors/errors.js';
import type { Issue } from '../../../../actors/errors.js';
import { keyOf } from '../../../../actors/ids.js';
import type { StepContext } from '../../../../actors/step/step.machine.js';
import { canonicalJson, stepGraphIssues, taskIssues, validationError } from '../../../run-file.js';
import { SUBMIT_CHUNK_MAX_BYTES } from '../../../limits.js';
import type { ParsedRequestOf, TaskSpecInput } from '../../../protocol.js';
import type { Handlers } from '../api-service.js';
import { admit } from './admission.js';
import type { BackendContext } from '../../context.js';
import type { Command } from '../../projection/index.js';
import { isStoreFullApiError } from '../../../../streams/errors.js';
import { eventsStoreRoom } from '../../storage/index.js';
import { newWorkBytes, storeFullFromServer } from '../../storage/index.js';
import { syncAll, syncSubject } from './sync.js';
import { writeAll } from './write-all.js';
import { requireHonoringLeader, plannerFieldUse } from './honoring-leader.js';
import { placementIssues, resolveRetry } from '../../../run-file-placement.js';
import { DEFAULT_MAX_ATTEMPTS } from '../../../../actors/task/retry-policy.js';

/** A write the server refused for lack of room is told as `store_full`, like an admission. */
async function refusingFullStore<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err: unknown) {
    if (isStoreFullApiError(err)) throw storeFullFromServer(err);
    throw err;
  }
}

/**
 * The chunked submit of DESIGN.md section 6: `submit.begin`, `submit.tasks`, `submit.commit`.
 *
 * The pending-submit record is the log itself. `begin` appends the run's `StepCreated`
 * events, each with the event id `step.<runId>.<stepId>.<hash>`: the file's hash lives in
 * the ids, so a later `begin` reads the run's step events and tells the same file (complete
 * what is missing, answer ok) from a different one (`conflict`) without any other store.
 * Tasks are created with the id `create.<runId>.<taskId>`, so a retried chunk is deduped by
 * the server or found already created (same spec: fine; other spec: `conflict`). `commit`
 * checks every step holds its declared number of tasks, then appends `RunSubmitted` last:
 * the reconciler dispatches only runs it has seen submitted, so a cut-short submit is inert.
 * `begin` also refuses (`overloaded`) a run that would take the open tasks over
 * `SONAR_MAX_OPEN_TASKS` (admission.ts).
 *
 * New work is admitted only while it fits in the event log next to what open tasks still have
 * to append (store-room.ts): `begin` judges the whole run (its task count, and the tasks' size
 * when the client sends `bytes`) before writing anything, each chunk judges itself, and a
 * refusal is `store_full`. `commit` is never refused for room: it only ends an admitted run.
 */
export function submitHandlers(ctx: BackendContext): Handlers {
  const { names: n, writer } = ctx;
  const stepEventId = (runId: string, stepId: string, hash: string): string =>
    `step.${runId}.${stepId}.${hash}`;

  /**
   * The run's steps in creation (stream) order, from a projection that has caught up: a walk
   * of the step table. Not a read of `<prefix>.events.step.<runId>.*`: nats-server 2.9 serves
   * a wildcard-filtered consumer by scanning the stream from its start, which made every
   * submit cost a full scan (three per run) on a stream of millions of events.
   */
  const stepIdsOf = (runId: string): string[] => {
    const prefix = `${runId}.`;
    const ids: string[] = [];
    for (const key of ctx.loop.projection.steps.keys()) {
      if (key.startsWith(prefix)) ids.push(key.slice(prefix.length));
    }
    return ids;
  };

  /**
   * Refuses (`conflict`) when any of `stepIds`, stored steps of the run, is not a step of this
   * file: one the file does not have, or one whose `StepCreated` id carries another hash
   * (read from that step's own subject).
   */
  const checkSameFile = async (
    runId: string,
    hash: string,
    stepIds: string[],
    wanted: Map<string, unknown>,
  ): Promise<void> => {
    for (const stepId of stepIds) {
      if (!wanted.has(stepId)) throw differentFile(runId);
      const created = (await ctx.store.readAggregate(n.subjects.step(runId, stepId))).find(
        (r) => r.type === 'StepCreated',
      );
      if (created?.id !== stepEventId(runId, stepId, hash)) throw differentFile(runId);
    }
  };

  const differentFile = (runId: string): SonarError =>
    new SonarError(
      ErrorCode.Conflict,
      `run ${runId} was already submitted from a different run file: choose another runId`,
      { runId },
    );

  const taskData = (runId: string, step: StepContext, t: TaskSpecInput) => ({
    runId,
    stepId: step.stepId,
    taskId: t.id,
    tags: t.tags ?? step.tags,
    ...(t.command !== undefined && { command: t.command }),
    ...(t.input !== undefined && { input: t.input }),
    // The task's own wins, then its step's `retry`: resolved here, so that every backend
    // (an older one too) counts the attempts the run file asked for.
    maxAttempts: t.maxAttempts ?? step.retry?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    ...(t.priority !== undefined && { priority: t.priority }),
    ...(t.notBefore !== undefined && { notBefore: t.notBefore }),
    ...(t.delay !== undefined && { delayMs: t.delay }),
  });

  /** Ids of the tasks whose stored spec is not the one asked for (or that are missing). */
  const differingTasks = (runId: string, step: StepContext, tasks: TaskSpecInput[]): string[] =>
    tasks
      .filter((t) => {
        const stored = ctx.loop.projection.tasks.get(keyOf(runId, t.id))?.snapshot.context.spec;
        return !stored || canonicalJson(stored) !== canonicalJson(taskData(runId, step, t));
      })
      .map((t) => t.id);

  return {
    'submit.begin': async (req) => {
      const issues = stepGraphIssues(req.steps);
      req.steps.forEach((step, i) => issues.push(...placementIssues(step, `steps.${i}`)));
      const sum = req.steps.reduce((acc, s) => acc + s.taskCount, 0);
      if (sum !== req.taskCount) {
        issues.push({
          path: 'taskCount',
          message: `is ${req.taskCount} but the steps declare ${sum} tasks in all`,
        });
      }
      if (issues.length > 0) throw validationError('submit.begin', issues);
      await syncAll(ctx);
      requireHonoringLeader(ctx.loop.projection, req.runId, plannerFieldUse(req.steps));
      // Its events were purged and nothing can be created under its id again (the fold
      // refuses it): say so, rather than fail on each step.
      if (ctx.loop.projection.expiredRuns.has(req.runId)) {
        throw new SonarError(
          ErrorCode.Conflict,
          `run ${req.runId} finished and expired (SONAR_RETENTION): choose another runId`,
          { runId: req.runId },
        );
      }
      const wanted = new Map(req.steps.map((s) => [s.id, s]));
      const have = stepIdsOf(req.runId);
      await checkSameFile(req.runId, req.hash, have, wanted);
      const created = have.reduce(
        (sum, id) => sum + (ctx.loop.projection.stepTasks.get(keyOf(req.runId, id))?.length ?? 0),
        0,
      );
      admit(ctx.loop.projection, req.taskCount, created, ctx.config.maxOpenTasks);
      // A run already committed needs no room; any other begin is new work, judged whole.
      const release = ctx.loop.projection.runs.has(req.runId)
        ? () => {}
        : await eventsStoreRoom(ctx).admit(newWorkBytes(req.taskCount, req.bytes ?? 0));
      try {
        return await refusingFullStore(() => begin(req, wanted, have));
      } finally {
        release();
      }
    },

    'submit.tasks': async (req) => {
      const release = await admitChunk(req);
      try {
        return await refusingFullStore(() => tasks(req));
      } finally {
        release();
      }
    },

    'submit.commit': async (req, call) => {
      await syncAll(ctx);
      const run = ctx.loop.projection.runs.get(req.runId);
      if (run) return { runId: req.runId, taskCount: run.snapshot.context.taskCount };
      return refusingFullStore(() => commit(req, call.traceparent));
    },
  };

  /**
   * Room for a chunk's tasks that do not exist yet (a retried chunk needs none). Its run was
   * admitted whole by `begin` (with `bytes`, from a newer client), so the chunk may dip into
   * the base reserve; only a concurrent submit that took the room meanwhile can cut it short,
   * and a cut-short submit is inert and completed by submitting the same file again.
   */
  async function admitChunk(req: ParsedRequestOf<'submit.tasks'>): Promise<() => void> {
    const fresh = req.tasks.filter((t) => !ctx.loop.projection.tasks.has(keyOf(req.runId, t.id)));
    if (fresh.length === 0) return () => {};
    const bytes = Buffer.byteLength(JSON.stringify(fresh), 'utf8');
    return eventsStoreRoom(ctx).admit(newWorkBytes(fresh.length, bytes), { begun: true });
  }

  async function begin(
    req: ParsedRequestOf<'submit.begin'>,
    wanted: Map<string, ParsedRequestOf<'submit.begin'>['steps'][number]>,
    have: string[],
  ) {
    const cmds: Command[] = [...wanted.values()]
      .filter((s) => !have.includes(s.id))
      .map((s) => ({
        subject: n.subjects.step(req.runId, s.id),
        type: 'StepCreated',
        data: {
          runId: req.runId,
          stepId: s.id,
          tags: s.tags,
          ...(s.maxConcurrent !== undefined && { maxConcurrent: s.maxConcurrent }),
          after: s.after,
          taskCount: s.taskCount,
          output: s.output,
          ...(s.timeoutMs !== undefined && { timeoutMs: s.timeoutMs }),
          ...(s.priority !== undefined && { priority: s.priority }),
          ...(s.notBefore !== undefined && { notBefore: s.notBefore }),
          ...(s.delay !== undefined && { delayMs: s.delay }),
          ...(s.retry !== undefined && { retry: resolveRetry(s.retry) }),
        },
        id: stepEventId(req.runId, s.id, req.hash),
      }));
    // One by one, in file order: the steps' creation order is their dispatch order.
    const mine = new Set<string>();
    for (const cmd of cmds) {
      try {
        await writer.write(cmd);
        mine.add((cmd.data as { stepId: string }).stepId);
      } catch (err: unknown) {
        if (!(err instanceof IllegalTransitionError)) throw err;
      }
    }
    // A concurrent begin of another file may have won a step, or added steps of its own:
    // look again, and read the creation of every step this request did not write itself.
    if (cmds.length > 0) {
      await syncAll(ctx);
      const others = stepIdsOf(req.runId).filter((id) => !mine.has(id) && !have.includes(id));
      await checkSameFile(req.runId, req.hash, others, wanted);
    }
    return { runId: req.runId, steps: req.steps.length, taskCount: req.taskCount };
  }

  async function tasks(req: ParsedRequestOf<'submit.tasks'>) {
    // The step, not the whole stream: concurrent chunks of this run must not wait on each
    // other's appends. A task another backend created meanwhile is caught by its event id
    // (deduped) or by the append's expected sequence (then re-judged), and checked below.
    await syncSubject(ctx, n.subjects.step(req.runId, req.stepId));
    const stepEntry = ctx.loop.projection.steps.get(keyOf(req.runId, req.stepId));
    if (!stepEntry) {
      throw new SonarError(
        ErrorCode.NotFound,
        `step ${req.stepId} of run ${req.runId} was not begun: call submit.begin first`,
        { runId: req.runId, stepId: req.stepId },
      );
    }
    const step = stepEntry.snapshot.context;
    const issues = chunkIssues(req, ctx.config.maxInputBytes);
    if (issues.length > 0) throw validationError('submit.tasks', issues);
    requireHonoringLeader(ctx.loop.projection, req.runId, plannerFieldUse(req.tasks, 'tasks'));
    const fresh: { cmd: Command; task: TaskSpecInput }[] = [];
    const toCheck: TaskSpecInput[] = [];
    for (const t of req.tasks) {
      if (ctx.loop.projection.tasks.has(keyOf(req.runId, t.id))) toCheck.push(t);
      else {
        const cmd: Command = {
          subject: n.subjects.task(req.runId, t.id),
          type: 'TaskCreated',
          data: taskData(req.runId, step, t),
          id: `create.${req.runId}.${t.id}`,
        };
        fresh.push({ cmd, task: t });
      }
    }
    const stepKey = keyOf(req.runId, req.stepId);
    const before = ctx.loop.projection.stepTasks.get(stepKey)?.length ?? 0;
    if (before + fresh.length > step.taskCount) {
      const message = `step ${req.stepId} declares ${step.taskCount} tasks; this chunk would make ${before + fresh.length}`;
      throw validationError('submit.tasks', [{ path: 'tasks', message }]);
    }
    const conflicts = differingTasks(req.runId, step, toCheck);
    if (conflicts.length === 0) {
      const outcomes = await writeAll(
        writer,
        fresh.map((f) => f.cmd),
      );
      // Only what this request did not append itself may differ from what it asked for.
      const others = fresh.filter((_, i) => outcomes[i] !== 'written').map((f) => f.task);
      conflicts.push(...differingTasks(req.runId, step, others));
    }
    if (conflicts.length > 0) {
      throw new SonarError(
        ErrorCode.Conflict,
        `run ${req.runId}: ${conflicts.length} task(s) already exist with a different spec (${conflicts.slice(0, 5).join(', ')}${conflicts.length > 5 ? ', ...' : ''}): a different run file under an existing runId`,
        { runId: req.runId, taskIds: conflicts.slice(0, 100) },
      );
    }
    const taskCount = ctx.loop.projection.stepTasks.get(stepKey)?.length ?? 0;
    return { runId: req.runId, stepId: req.stepId, taskCount };
  }

  async function commit(req: ParsedRequestOf<'submit.commit'>, traceparent: string | undefined) {
    const stepIds = stepIdsOf(req.runId);
    if (stepIds.length === 0) {
      throw new SonarError(
        ErrorCode.NotFound,
        `run ${req.runId} has no submit in progress: call submit.begin first`,
        { runId: req.runId },
      );
    }
    const issues: Issue[] = [];
    let taskCount = 0;
    for (const stepId of stepIds) {
      const want = ctx.loop.projection.steps.get(keyOf(req.runId, stepId))?.snapshot.context
        .taskCount;
      const have = ctx.loop.projection.stepTasks.get(keyOf(req.runId, stepId))?.length ?? 0;
      if (want === undefined) continue;
      taskCount += want;
      if (have !== want) {
        issues.push({
          path: `steps.${stepId}`,
          message: `has ${have} of its ${want} tasks: send the missing chunks, then commit`,
        });
      }
    }
    if (issues.length > 0) throw validationError('submit.commit', issues);
    try {
      await writer.write({
        subject: n.subjects.run(req.runId),
        type: 'RunSubmitted',
        // The commit's span context becomes the run's: the leader that dispatches its tasks,
        // perhaps much later and elsewhere, reads it from the projection.
        data: { runId: req.runId, stepIds, taskCount, ...(traceparent && { traceparent }) },
        id: `run.${req.runId}`,
      });
    } catch (err: unknown) {
      // Committed meanwhile by a retry on another backend: the same answer.
      if (!(err instanceof IllegalTransitionError)) throw err;
    }
    return { runId: req.runId, taskCount };
  }
}

/** Problems of one chunk beyond its schema: size, duplicate ids, inputs over SONAR_MAX_INPUT. */
function chunkIssues(req: ParsedRequestOf<'submit.tasks'>, maxInputBytes: number): Issue[] {
  const bytes = Buffer.byteLength(JSON.stringify(req.tasks), 'utf8');
  // No input can be larger than the whole chunk: size each input only when the chunk could
  // hold one over the limit.
  const limits = { maxInputBytes: bytes <= maxInputBytes ? Infinity : maxInputBytes };
  const issues = taskIssues(req.tasks, 'tasks', limits);
  if (bytes > SUBMIT_CHUNK_MAX_BYTES) {
    issues.push({
      path: 'tasks',
      message: `chunk is ${bytes} bytes, over ${SUBMIT_CHUNK_MAX_BYTES}: send smaller chunks`,
    });
  }
  return issues;
}
