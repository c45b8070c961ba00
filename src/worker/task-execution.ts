import type { Delivery } from './dispatch-source.js';
import { ErrorCode } from '../../actors/errors.js';
import { outputSizeProblem } from '../limits.js';
import type { Logger } from '../log.js';
import type { Msg } from '@nats-io/transport-node';
import { dispatchMessageSchema } from '../protocol.js';
import { cancelOf } from './cancel-control.js';
import { jsonOutputProblem } from './output-kind.js';
import type { DispatchMessage } from '../protocol.js';
import { isApiError } from './api-client.js';
import type { ApiClient } from './api-client.js';
import { CommandFailedError, isNonRetryableError } from './errors.js';
import { AttemptFeed } from './attempt-feed.js';
import { runHandler } from './handler-run.js';
import type { Outcome } from './handler-run.js';
import type { FeedSend } from './attempt-feed.js';
import type { HandlerContext, ResolvedWorkerOptions } from './options.js';
import { packOutput, toBytes } from './task-output.js';
import { RequestBatcher } from './request-batcher.js';
import { INVALID_SPAN_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import type { Span } from '@opentelemetry/api';
import { failSpan, inSpan, passedOn, tracingInUse } from '../tracing/tracer.js';
import { TRACEPARENT, contextFromTraceparent, traceparentOf } from '../tracing/traceparent.js';
import type { ResultOutput } from './task-output.js';

/** Why a running task was stopped early; each ends in a different report (or none). */
type StopReason = 'timeout' | 'cancel' | 'release' | 'lost';

interface RunningTask {
  key: string;
  dispatch: DispatchMessage;
  ac: AbortController;
  why: StopReason | null;
  /** The attempt span's, carried by every request about this attempt. */
  traceparent: string | undefined;
}

/** The span of an attempt while tracing is not in use: records nothing. */
const UNTRACED: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** A dispatch message that cannot be started now goes back after this delay. */
export const NAK_DELAY_MS = 1_000;
/**
 * Results and failures are retried for as long as the worker lives: a backend or NATS
 * outage is waited out, and the finished work is not thrown away (giving up would leave the
 * task to be taken back and run again).
 */
const REPORT_RETRY_MS = Infinity;
/** Drain, release and leave are retried this long: the reconciler covers a lost one. */
export const GOODBYE_RETRY_MS = 10_000;
const MAX_ERROR_CHARS = 8 * 1024;
/** A progress or log report is retried this long (a brief brown-out), then dropped. */
const FEED_RETRY_MS = 5_000;

/** What a {@link TaskExecution} needs of its worker. */
export interface TaskExecutionParts {
  workerId: string;
  opts: Pick<ResolvedWorkerOptions, 'handler' | 'killGraceMs' | 'maxOutputBytes'>;
  log: Logger;
  api: ApiClient;
  /** Aborted when the worker ends: its requests stop being retried. */
  signal: AbortSignal;
  /** Puts an output too large to travel inline where the backend finds it; gives its ref. */
  upload(d: DispatchMessage, bytes: Uint8Array): Promise<string>;
  /** An upload failed: the store is opened afresh next time. */
  uploadFailed(): void;
  /** Whether pulled messages may be started now. */
  accepting(): boolean;
  /** Whether a task that starts now is handed back at once. */
  releasing(): boolean;
  /** The backend answered `conflict`: this worker is Lost or Left. */
  conflict(err: unknown): Promise<void>;
}

/**
 * The tasks of one worker, from a pulled dispatch message to its report (DESIGN.md section
 * 6, steps 4 to 7): `start` (the message is acked only once it answered), the handler under
 * the step's timeout, then `result`, `fail` or `release`. Cancels and the drain stop tasks
 * through their abort signal; each stop reason ends in its own report, or none.
 */
export class TaskExecution {
  private readonly tasks = new Map<string, RunningTask>();
  private forgedCancels = 0;
  private forgedLoggedAt = -Infinity;
  /**
   * Tasks whose `start` is in flight. Pulses list them with the running ones: the backend may
   * have started the task already, and a task its live worker does not list is taken back
   * (actors/reconciler/recovery.ts, givenBack).
   */
  private readonly starting = new Set<string>();
  /** Messages between pull and report: the drain waits for these. */
  private handling = 0;
  private idleWaiters: (() => void)[] = [];
  private feedWarned = false;
  /** `start` and `result` requests made together travel in one message. */
  private readonly batcher: RequestBatcher;
  /** Whether attempts get spans of their own (tracingInUse), settled when the worker starts. */
  private readonly tracing = tracingInUse();

  constructor(private readonly parts: TaskExecutionParts) {
    this.batcher = new RequestBatcher(parts.api, parts.workerId);
  }

  /** Tasks started and not yet reported. */
  get running(): number {
    return this.tasks.size;
  }

  /** Whether any pulled message is not reported yet. */
  get busy(): boolean {
    return this.handling > 0;
  }

  /** `runId.taskId` of every task held, starting or running: what a pulse lists. */
  held(): string[] {
    return [...this.starting, ...this.tasks.keys()];
  }

  /** Resolves once every pulled message is reported. */
  idle(): Promise<void> {
    if (this.handling === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Takes one pulled message to its end; never rejects. */
  async handle(m: Delivery): Promise<void> {
    this.handling++;
    try {
      await this.handleMessage(m);
    } finally {
      this.handling--;
      if (this.handling === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /** Hands back every running task (the drain deadline came). */
  releaseAll(): Promise<void> {
    return Promise.all([...this.tasks.values()].map((t) => this.release(t))).then(() => {});
  }

  /** Stops every running task unreported: the worker failed, the reconciler recovers them. */
  abandonAll(): void {
    for (const t of this.tasks.values()) this.stopTask(t, 'lost');
  }

  /** A cancel broadcast: stops the matching running tasks. */
  onCancel(msg: Pick<Msg, 'data' | 'reply' | 'headers'>): void {
    const c = cancelOf(msg);
    if (c === null) {
      // Once a minute at most: a flood of forgeries must not become a flood of log lines.
      this.forgedCancels++;
      const now = performance.now();
      if (now - this.forgedLoggedAt >= 60_000) {
        this.parts.log.warn("cancel broadcasts ignored: not the backend's", {
          ignored: this.forgedCancels,
        });
        this.forgedCancels = 0;
        this.forgedLoggedAt = now;
      }
      return;
    }
    for (const task of this.tasks.values()) {
      const d = task.dispatch;
      if (d.runId === c.runId && (c.taskId === undefined || c.taskId === d.taskId)) {
        this.stopTask(task, 'cancel');
      }
    }
  }

  private async handleMessage(m: Delivery): Promise<void> {
    const { log } = this.parts;
    let raw: unknown;
    try {
      raw = m.json();
    } catch {
      raw = undefined;
    }
    const parsed = dispatchMessageSchema.safeParse(raw);
    if (!parsed.success) {
      // No argument: on 2.9 term("reason") is redelivered (NATS-2.9.md).
      m.term();
      log.warn('dispatch message not understood: terminated', { seq: m.seq });
      return;
    }
    if (!this.parts.accepting()) {
      m.nak();
      return;
    }
    const d = parsed.data;
    const parent = m.headers?.get(TRACEPARENT);
    if (!this.tracing) {
      // What the no-op span would do: pass the dispatch's trace context on to the requests.
      await this.attempt(m, d, UNTRACED, passedOn(parent));
      return;
    }
    // One span per attempt, from the pulled message to the report, the child of the
    // leader's dispatch span (the message's `traceparent` header); the handler runs in it,
    // so a user's own spans nest under the attempt.
    await inSpan(
      'attempt',
      {
        kind: SpanKind.CONSUMER,
        parent: contextFromTraceparent(parent),
        attributes: {
          'sonar.run_id': d.runId,
          'sonar.step_id': d.stepId,
          'sonar.task_id': d.taskId,
          'sonar.attempt': d.attempt,
          'sonar.attempt_id': d.attemptId,
          'sonar.worker_id': this.parts.workerId,
        },
      },
      (span, ctx) => this.attempt(m, d, span, traceparentOf(ctx)),
    );
  }

  private async attempt(
    m: Delivery,
    d: DispatchMessage,
    span: Span,
    traceparent: string | undefined,
  ): Promise<void> {
    const { log } = this.parts;
    const key = `${d.runId}.${d.taskId}`;
    const traced = traceparent === undefined ? {} : { traceparent };
    this.starting.add(key);
    try {
      await this.batcher.request('start', this.credsOf(d), {
        signal: this.parts.signal,
        ...traced,
      });
    } catch (err: unknown) {
      this.starting.delete(key);
      span.setAttribute('sonar.outcome', 'not-started');
      failSpan(span, err);
      if (isApiError(err, ErrorCode.Conflict)) {
        m.nak();
        await this.parts.conflict(err);
      } else if (isApiError(err) && err.code !== ErrorCode.Unavailable) {
        // Stale, forged, cancelled...: this message will never be startable.
        m.term();
        log.warn('task dropped', { runId: d.runId, taskId: d.taskId, err });
      } else {
        // Unanswered, or `unavailable` after every retry (a backend brown-out): the message
        // is the task's only trace, so it goes back for a later delivery (DESIGN.md section 6).
        m.nak(NAK_DELAY_MS);
        log.warn('start not carried out: message given back', { taskId: d.taskId, err });
      }
      return;
    }
    // Ack only once start has answered: until then the message is the task's only trace.
    // A plain ack, not a confirmed one: the start event now fences the task (attempt, token,
    // holder), so a lost ack only redelivers the message, whose start then answers stale and
    // the message is terminated; a confirmation would buy nothing but a round trip.
    m.ack();
    const task: RunningTask = {
      key,
      dispatch: d,
      ac: new AbortController(),
      why: null,
      traceparent,
    };
    this.tasks.set(task.key, task);
    this.starting.delete(key);
    try {
      if (this.parts.releasing()) await this.release(task);
      else {
        const outcome = await this.execute(task);
        if (!outcome.ok) failSpan(span, outcome.error);
        await this.report(task, outcome);
      }
    } finally {
      this.tasks.delete(task.key);
      span.setAttribute('sonar.outcome', task.why ?? 'reported');
    }
  }

  /**
   * Runs the handler, bounded by the step's timeout and by abandonment after an abort; its
   * progress and log go out on the way, and the log's end before the report.
   */
  private async execute(task: RunningTask): Promise<Outcome> {
    const d = task.dispatch;
    const { handler, killGraceMs } = this.parts.opts;
    const timer =
      d.timeoutMs === undefined
        ? undefined
        : setTimeout(() => this.stopTask(task, 'timeout'), d.timeoutMs);
    const feed = new AttemptFeed(this.credsOf(d), this.feedSend, (verb, err) =>
      this.feedNotStored(verb, d, err),
    );
    const ctx: HandlerContext = {
      progress: (value) => feed.progress(value),
      log: (text, stream = 'stderr') => feed.write(stream, text),
      signal: task.ac.signal,
      runId: d.runId,
      stepId: d.stepId,
      taskId: d.taskId,
      attempt: d.attempt,
      attemptId: d.attemptId,
      ...(d.command !== undefined && { command: d.command }),
    };
    try {
      return await runHandler(handler, d.input, ctx, killGraceMs + 1_000);
    } finally {
      clearTimeout(timer);
      // A finished or timed-out attempt's log is worth its last chunk; a cancelled, released
      // or abandoned one's reports would only be refused.
      if (task.why === null || task.why === 'timeout') await feed.close();
      else feed.abandon();
    }
  }

  /**
   * A progress or log report that was not stored: at warn once per worker (a backend that
   * predates these verbs refuses every one), then at debug.
   */
  private feedNotStored(verb: string, d: DispatchMessage, err: unknown): void {
    const level = this.feedWarned ? 'debug' : 'warn';
    this.feedWarned = true;
    this.parts.log[level](`${verb} report not stored`, { runId: d.runId, taskId: d.taskId, err });
  }

  /** Progress and log reports: retried briefly, then dropped (they are an aid). */
  private readonly feedSend: FeedSend = async (verb, body) => {
    await this.parts.api.request(verb, body as never, {
      retryForMs: FEED_RETRY_MS,
      signal: this.parts.signal,
    });
  };

  private stopTask(task: RunningTask, why: StopReason): void {
    if (task.why !== null) return;
    task.why = why;
    task.ac.abort(why);
  }

  private credsOf(d: DispatchMessage) {
    return {
      runId: d.runId,
      taskId: d.taskId,
      attemptId: d.attemptId,
      token: d.token,
      workerId: this.parts.workerId,
    };
  }

  private async report(task: RunningTask, outcome: Outcome): Promise<void> {
    const d = task.dispatch;
    switch (task.why) {
      case 'cancel':
        this.parts.log.info('task cancelled', { runId: d.runId, taskId: d.taskId });
        return;
      case 'release':
      case 'lost':
        return;
      case 'timeout': {
        const exitCode = outcome.ok ? -1 : exitCodeOf(outcome.error);
        return this.fail(task, exitCode, `timed out after ${d.timeoutMs} ms`, true);
      }
      case null:
        break;
    }
    if (!outcome.ok) {
      const err = outcome.error;
      const message = err instanceof Error ? err.message : String(err);
      const retryable =
        !isNonRetryableError(err) && !(err instanceof CommandFailedError && !err.retryable);
      return this.fail(task, exitCodeOf(err), message, retryable);
    }
    const bytes = toBytes(outcome.value);
    const tooBig = outputSizeProblem(bytes.byteLength, this.parts.opts.maxOutputBytes);
    if (tooBig !== null) return this.fail(task, -1, `output ${tooBig}`, false);
    const notJson = d.output === 'json' ? jsonOutputProblem(outcome.value, bytes) : null;
    if (notJson !== null) return this.fail(task, -1, notJson, false);
    let output: ResultOutput;
    try {
      output = await packOutput(bytes, (b) => this.parts.upload(d, b));
    } catch (err: unknown) {
      this.parts.uploadFailed();
      const why = err instanceof Error ? err.message : String(err);
      return this.fail(task, -1, `output upload failed: ${why}`, true);
    }
    await this.send('result', { ...this.credsOf(d), output }, REPORT_RETRY_MS);
  }

  private fail(task: RunningTask, exitCode: number, error: string, retryable: boolean) {
    return this.send(
      'fail',
      {
        ...this.credsOf(task.dispatch),
        exitCode,
        error: error.slice(-MAX_ERROR_CHARS),
        retryable,
      },
      REPORT_RETRY_MS,
    );
  }

  private release(task: RunningTask): Promise<void> {
    this.stopTask(task, 'release');
    return this.send('release', this.credsOf(task.dispatch), GOODBYE_RETRY_MS);
  }

  /** Sends a report; a refusal is logged (the task moved on), `conflict` fails the worker. */
  private async send(
    verb: 'result' | 'fail' | 'release',
    body: Parameters<ApiClient['request']>[1],
    retryForMs: number,
  ): Promise<void> {
    const b = body as { runId: string; taskId: string };
    const { api, log, signal } = this.parts;
    const traceparent = this.tasks.get(`${b.runId}.${b.taskId}`)?.traceparent;
    try {
      const opts = { retryForMs, signal, ...(traceparent !== undefined && { traceparent }) };
      if (verb === 'result') await this.batcher.request(verb, body as never, opts);
      else await api.request(verb, body as never, opts);
      log.debug(`task ${verb} sent`, { runId: b.runId, taskId: b.taskId });
    } catch (err: unknown) {
      if (isApiError(err, ErrorCode.Conflict)) await this.parts.conflict(err);
      else log.warn(`${verb} refused or unanswered`, { runId: b.runId, taskId: b.taskId, err });
    }
  }
}

function exitCodeOf(err: unknown): number {
  return err instanceof CommandFailedError ? err.exitCode : -1;
}
