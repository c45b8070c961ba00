import { hostname } from 'node:os';
import { JetStreamApiCodes, JetStreamApiError, jetstream } from '@nats-io/jetstream';
import type { Consumer, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { ErrorCode } from '../../actors/errors.js';
import { assertId } from '../../actors/ids.js';
import { names, workerInboxPrefix } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { hostToken, newId } from '../ids.js';
import { outputSizeProblem } from '../limits.js';
import { assertSlotsFit, DEFAULT_MAX_PAYLOAD } from '../pulse-size.js';
import type { Logger } from '../log.js';
import { connectNats } from '../nats.js';
import { WorkerCredential } from './credential.js';
import { isAuthError, isExpiredCredential } from './auth-errors.js';
import { cancelControlSchema, dispatchMessageSchema } from '../protocol.js';
import type { CredentialReply, DispatchMessage, JoinReply, RegistryEntry } from '../protocol.js';
import { createOutputStore } from '../storage/create-output-store.js';
import { stageOutput } from '../storage/staged-output.js';
import { outputKey } from '../storage/output-store.js';
import type { OutputStore } from '../storage/output-store.js';
import { ApiClient, isApiError } from './api-client.js';
import { CommandFailedError, IllegalStateError, isNonRetryableError } from './errors.js';
import { runHandler } from './handler-run.js';
import type { Outcome } from './handler-run.js';
import { resolveWorkerOptions } from './options.js';
import type { HandlerContext, ResolvedWorkerOptions, WorkerOptions } from './options.js';
import { Pulse } from './pulse.js';
import type { Standing } from './pulse.js';
import { Slots } from './slots.js';
import { untilAnswered } from './start-wait.js';
import { ImdsClient, SpotNoticeWatcher } from './spot-notice.js';
import { packOutput, toBytes } from './task-output.js';
import type { ResultOutput } from './task-output.js';
import type { SpotNotice } from './spot-notice.js';
import { Deadline } from '../grace.js';

/** The worker's lifecycle (STYLE.md C7): Idle -> Running -> Draining -> Stopped, or Failed. */
export type WorkerState = 'Idle' | 'Running' | 'Draining' | 'Stopped' | 'Failed';

/** Why a running task was stopped early; each ends in a different report (or none). */
type StopReason = 'timeout' | 'cancel' | 'release' | 'lost';

interface RunningTask {
  key: string;
  dispatch: DispatchMessage;
  ac: AbortController;
  why: StopReason | null;
}

/** A dispatch message that cannot be started now goes back after this delay. */
const NAK_DELAY_MS = 1_000;
/** Binding to a consumer found gone just after join: join again this many times, at most. */
const BIND_ATTEMPTS = 3;
/**
 * Results and failures are retried for as long as the worker lives: a backend or NATS
 * outage is waited out, and the finished work is not thrown away (giving up would leave the
 * task to be taken back and run again).
 */
const REPORT_RETRY_MS = Infinity;
/** Drain, release and leave are retried this long: the reconciler covers a lost one. */
const GOODBYE_RETRY_MS = 10_000;
const MAX_ERROR_CHARS = 8 * 1024;

/**
 * A Sonar worker (DESIGN.md section 6): joins, pulses, pulls at most `slots` tasks across its
 * tags, starts, runs and reports each, honours cancels and step timeouts, and drains on
 * request (SIGTERM in the CLI, or a spot notice): it pulses `active: false`, stops pulling,
 * lets running tasks finish until the deadline, releases the rest, leaves and deletes its
 * registry key. A `conflict` answer (this worker is Lost or Left) ends it as Failed.
 *
 * Build one with {@link createWorker}; `run()` resolves once it has drained.
 */
export class Worker {
  readonly workerId: string;
  readonly host: string;
  /** Resolves when the worker has Stopped; rejects when it Failed. */
  readonly done: Promise<void>;
  private readonly opts: ResolvedWorkerOptions;
  private readonly log: Logger;
  private _state: WorkerState = 'Idle';
  private settle!: { resolve: () => void; reject: (err: unknown) => void };
  private nc: NatsConnection | null = null;
  /** Whether `nc` was opened here (and so is closed here), not handed in. */
  private ownsNc = false;
  private credential: WorkerCredential;
  private n: Names;
  private api: ApiClient | null = null;
  private pulse: Pulse | null = null;
  private outputs: Promise<OutputStore> | null = null;
  private cancelSub: Subscription | null = null;
  private spot: SpotNoticeWatcher | null = null;
  private instanceId: string | undefined;
  private readonly slots: Slots;
  private readonly tasks = new Map<string, RunningTask>();
  /**
   * Tasks whose `start` is in flight. Pulses list them with the running ones: the backend may
   * have started the task already, and a task its live worker does not list is taken back
   * (actors/reconciler/recovery.ts, givenBack).
   */
  private readonly starting = new Set<string>();
  private pullLoops: Promise<void>[] = [];
  /** A join sent again to have a vanished dispatch consumer recreated, while in flight. */
  private rejoining: Promise<void> | null = null;
  /** Messages between pull and report: the drain waits for these. */
  private handling = 0;
  private idleWaiters: (() => void)[] = [];
  /** False once draining: pulled messages are nak'ed, not started. */
  private accepting = false;
  /** True once the drain deadline came: a task that starts now is released at once. */
  private releasing = false;
  private releaseTrigger: (() => void) | null = null;
  /** Aborted when the worker stops or fails: ends retries of its requests. */
  private readonly lifecycle = new AbortController();

  constructor(options: WorkerOptions) {
    this.opts = resolveWorkerOptions(options);
    // As the join schema takes it: the pulse carries the same, within its size bound.
    this.host = (options.host ?? hostname()).slice(0, 255);
    this.workerId = options.workerId ?? `${hostToken(this.host, 40)}-${newId()}`;
    assertId('workerId', this.workerId);
    this.instanceId = this.opts.instanceId;
    this.n = names(this.opts.prefix);
    this.slots = new Slots(this.opts.slots);
    this.log = this.opts.log.child({ component: 'worker', workerId: this.workerId });
    this.credential = new WorkerCredential(this.workerId, this.log);
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // `done` may be awaited by nobody (start() rejects instead): never an unhandled rejection.
    this.done.catch(() => {});
  }

  get state(): WorkerState {
    return this._state;
  }

  /** Tasks started and not yet reported. */
  get running(): number {
    return this.tasks.size;
  }

  /** Starts, then resolves once drained (rejects when the worker failed). */
  async run(): Promise<void> {
    await this.start();
    await this.done;
  }

  /**
   * Joins and starts pulling. Rejects (and the worker is Failed) when the join is refused.
   * @throws IllegalStateError unless Idle.
   */
  async start(): Promise<void> {
    if (this._state !== 'Idle') throw new IllegalStateError(this._state, 'start');
    this._state = 'Running';
    try {
      await this.open();
    } catch (err: unknown) {
      await this.failWith(err);
      throw err;
    }
  }

  private async open(): Promise<void> {
    const o = this.opts;
    const nc = await this.connect();
    // A server may take smaller messages than the 1 MiB the options were checked against.
    assertSlotsFit(o.slots, nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD);
    void nc.closed().then((err) => {
      if (!this.lifecycle.signal.aborted) {
        void this.failWith(err ?? new Error('the NATS connection closed'));
      }
    });
    this.api = new ApiClient(nc, this.n, {
      timeoutMs: o.requestTimeoutMs,
      log: this.log,
      ...(this.credential.mode !== 'legacy' && {
        subject: (verb) => this.n.subjects.workerApi(this.workerId, verb),
      }),
    });
    this.credential.startRenewing(
      this.api,
      this.lifecycle.signal,
      () => this.enrollAgain(),
      (err) => {
        void this.failWith(err);
      },
    );
    const imds = o.spot === false ? null : new ImdsClient(o.imdsUrl, 1_000);
    const spotOn = imds !== null && (o.spot === true || (await imds.available()));
    if (imds && spotOn && this.instanceId === undefined) {
      this.instanceId =
        (await imds.get('/latest/meta-data/instance-id').catch(() => null)) ?? undefined;
    }
    const api = this.api;
    const waiting = { log: this.log, signal: this.lifecycle.signal };
    let joinSentAt = 0;
    const reply = await untilAnswered(
      'join',
      () => {
        joinSentAt = performance.now();
        return api.request<'join', JoinReply>('join', this.joinRequest(), {
          signal: this.lifecycle.signal,
        });
      },
      waiting,
    );
    // Direct gets name the key in the subject: a worker's credential may read its own key
    // only, which a STREAM.MSG.GET (the key in the payload) could not be held to.
    const kv = await untilAnswered(
      'registry bucket',
      () => new Kvm(this.jetstream()).open(this.n.buckets.workers, { allow_direct: true }),
      waiting,
    );
    this.pulse = new Pulse(
      kv,
      () => this.entry(),
      reply.pulseIntervalMs,
      this.log,
      (err) => {
        void this.failWith(err);
      },
      () => this.standing(),
    );
    // A backend may declare a worker whose key is missing a pulse TTL after its join Lost:
    // a first pulse later than half of that (a margin for clock skew between backends)
    // asks whether it still counts as joined.
    const pulse = this.pulse;
    await untilAnswered(
      'first pulse',
      () => pulse.start(joinSentAt + reply.pulseTtlMs / 2),
      waiting,
    );
    // Back from an outage: pulse now, not up to an interval later, so the registry key that
    // expired meanwhile is back well within the pulse TTL the reconciler waits after it.
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'reconnect' && this._state === 'Running') {
          this.pulse?.beat().catch((err: unknown) => this.log.warn('pulse failed', { err }));
        }
      }
    })().catch(() => {});
    this.cancelSub = nc.subscribe(this.n.subjects.controlCancel, {
      callback: (err, msg) => {
        if (!err) this.onCancel(msg.data);
      },
    });
    const js = this.jetstream();
    const consumers = await Promise.all(
      o.tags.map((t) =>
        untilAnswered(
          `consumer of tag ${t}`,
          () => this.bind(js, reply.stream, reply.consumers[t] ?? this.n.consumers.dispatch(t)),
          waiting,
        ),
      ),
    );
    if (this._state !== 'Running') return; // drained or failed while joining
    this.accepting = true;
    this.pullLoops = consumers.map((c) => this.pullLoop(c));
    if (imds && spotOn) {
      this.spot = new SpotNoticeWatcher(imds, (n) => this.onSpotNotice(n), o.spotPollMs, this.log);
      this.spot.start();
    }
    this.log.info('worker joined', { tags: o.tags, slots: o.slots, spot: spotOn });
  }

  /**
   * Connects with the configured credential (the fleet's bootstrap credential, in secure
   * mode) and enrolls. Given a credential of its own, the worker connects again with it,
   * its replies under its own inbox prefix, and closes the bootstrap connection.
   * Reconnects forever: a worker outlives a NATS restart; its registry key tells the rest.
   */
  private async connect(): Promise<NatsConnection> {
    const o = this.opts;
    const name = `sonar-worker-${this.workerId}`;
    const boot = o.nc ?? (await connectNats(o.connection, { name }));
    try {
      const bootApi = new ApiClient(boot, this.n, { timeoutMs: o.requestTimeoutMs, log: this.log });
      const mode = await untilAnswered(
        'enroll',
        () => this.credential.enroll(bootApi, this.lifecycle.signal),
        { log: this.log, signal: this.lifecycle.signal },
      );
      if (mode !== 'secure') {
        this.nc = boot;
        this.ownsNc = !o.nc;
        return boot;
      }
      this.nc = await connectNats(o.connection, {
        name,
        authenticator: this.credential.authenticator(),
        inboxPrefix: workerInboxPrefix(this.workerId),
        // A refused credential (expired in an outage, or revoked) is enrolled again rather
        // than the connection given up: see WorkerCredential.onAuthError.
        ignoreAuthErrorAbort: true,
      });
      this.ownsNc = true;
      const own = this.nc;
      void (async () => {
        for await (const s of own.status()) {
          if (s.type === 'error' && isAuthError(s.error)) {
            this.credential.onAuthError(isExpiredCredential(s.error));
          }
        }
      })().catch(() => {});
    } finally {
      if (!o.nc && this.nc !== boot) await boot.close().catch(() => {});
    }
    this.log.info('connected with its own credential');
    return this.nc;
  }

  /** `enroll` once more with the bootstrap credential, on a connection of its own. */
  private async enrollAgain(): Promise<CredentialReply> {
    const o = this.opts;
    const boot =
      o.nc ??
      (await connectNats(o.connection, {
        name: `sonar-worker-${this.workerId}-enroll`,
        life: 'one-shot',
      }));
    try {
      const api = new ApiClient(boot, this.n, { timeoutMs: o.requestTimeoutMs, log: this.log });
      return await api.request<'enroll', CredentialReply>(
        'enroll',
        { workerId: this.workerId, publicKey: this.credential.publicKey },
        { signal: this.lifecycle.signal },
      );
    } finally {
      if (!o.nc) await boot.close().catch(() => {});
    }
  }

  /**
   * Whether the backend still counts this worker joined: the same join again answers `ok`
   * for an Active or Draining worker and `conflict` for a Lost or Left one (DESIGN.md
   * section 6; every backend version answers so). Other errors are thrown: not known yet.
   */
  private async standing(): Promise<Standing> {
    // After an outage the whole fleet asks at once: spread the joins over a second.
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 1_000));
    try {
      await this.api!.request('join', this.joinRequest(), {
        retryForMs: GOODBYE_RETRY_MS,
        signal: this.lifecycle.signal,
      });
      return 'joined';
    } catch (err: unknown) {
      if (isApiError(err, ErrorCode.Conflict)) return 'gone';
      throw err;
    }
  }

  private joinRequest() {
    return {
      workerId: this.workerId,
      host: this.host.slice(0, 255),
      ...(this.instanceId !== undefined && { instanceId: this.instanceId }),
      tags: this.opts.tags,
      slots: this.opts.slots,
    };
  }

  /**
   * The tag's consumer, as `join` made it. The sweep deletes the consumers of tags nobody
   * advertised for a day, and may do so just after `join` answered: then join again.
   */
  private async bind(js: JetStreamClient, stream: string, name: string): Promise<Consumer> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await js.consumers.get(stream, name);
      } catch (err: unknown) {
        if (!isConsumerNotFound(err) || attempt >= BIND_ATTEMPTS) throw err;
        await this.rejoin();
      }
    }
  }

  /** After a failed pull: whether the consumer was gone (and the join was sent again). */
  private async rebindIfGone(consumer: Consumer): Promise<boolean> {
    try {
      await consumer.info();
      return false;
    } catch (err: unknown) {
      if (!isConsumerNotFound(err)) return false;
    }
    await this.rejoin();
    return true;
  }

  /**
   * Has the dispatch consumers recreated. Workers may not create consumers; `join` does,
   * before it answers. The same join again is answered as the first (an id's join data never
   * changes) and appends nothing, so the worker sends it again: once at a time whatever the
   * number of tags, and its pull loops then find their consumer.
   */
  private rejoin(): Promise<void> {
    this.rejoining ??= (async () => {
      this.log.warn('dispatch consumer gone: joining again to have it recreated');
      try {
        await this.api!.request('join', this.joinRequest(), { signal: this.lifecycle.signal });
      } catch (err: unknown) {
        if (isApiError(err, ErrorCode.Conflict)) await this.failWith(err);
        else this.log.warn('join again failed: retried at the next failed pull', { err });
      }
    })().finally(() => {
      this.rejoining = null;
    });
    return this.rejoining;
  }

  private entry(): Omit<RegistryEntry, 'pulseAt'> {
    return {
      workerId: this.workerId,
      host: this.host,
      ...(this.instanceId !== undefined && { instanceId: this.instanceId }),
      tags: this.opts.tags,
      slots: this.opts.slots,
      active: this._state === 'Running',
      running: [...this.starting, ...this.tasks.keys()],
    };
  }

  /**
   * One tag's loop: take a free slot (waiting for one), plus this tag's share of the other
   * free slots, then pull that many messages in one request; never more than `slots` held.
   * Why a batch: one `next()` per message costs a pull round trip each, and a loop waiting on
   * it cannot ask for more, so a busy worker pulled one message per round trip.
   */
  private async pullLoop(consumer: Consumer): Promise<void> {
    while (this.accepting) {
      await this.slots.acquire();
      const share = Math.floor(this.slots.available / this.opts.tags.length);
      const taken = 1 + this.slots.tryTake(share);
      const giveBack = (n: number) => {
        for (let i = 0; i < n; i++) this.slots.release();
      };
      if (!this.accepting) {
        giveBack(taken);
        break;
      }
      let got = 0;
      try {
        const batch = await consumer.fetch({
          max_messages: taken,
          expires: this.opts.pullExpiresMs,
        });
        for await (const m of batch) {
          got++;
          this.handling++;
          void this.handleMessage(m).finally(() => {
            this.slots.release();
            this.handling--;
            if (this.handling === 0) for (const w of this.idleWaiters.splice(0)) w();
          });
          // Draining: what this batch still has coming would only be nak'ed.
          if (!this.accepting) await batch.close();
        }
      } catch (err: unknown) {
        giveBack(taken - got);
        got = taken;
        if (!this.accepting) break;
        if (!(await this.rebindIfGone(consumer))) this.log.warn('pull failed', { err });
        if (!this.accepting) break;
        await new Promise((r) => setTimeout(r, NAK_DELAY_MS));
      }
      giveBack(taken - got);
    }
  }

  private idle(): Promise<void> {
    if (this.handling === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async handleMessage(m: JsMsg): Promise<void> {
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
      this.log.warn('dispatch message not understood: terminated', { seq: m.seq });
      return;
    }
    if (!this.accepting) {
      m.nak();
      return;
    }
    const d = parsed.data;
    const creds = {
      runId: d.runId,
      taskId: d.taskId,
      attemptId: d.attemptId,
      token: d.token,
      workerId: this.workerId,
    };
    const key = `${d.runId}.${d.taskId}`;
    this.starting.add(key);
    try {
      await this.api!.request('start', creds, { signal: this.lifecycle.signal });
    } catch (err: unknown) {
      this.starting.delete(key);
      if (isApiError(err, ErrorCode.Conflict)) {
        m.nak();
        await this.failWith(err);
      } else if (isApiError(err) && err.code !== ErrorCode.Unavailable) {
        // Stale, forged, cancelled...: this message will never be startable.
        m.term();
        this.log.warn('task dropped', { runId: d.runId, taskId: d.taskId, err });
      } else {
        // Unanswered, or `unavailable` after every retry (a backend brown-out): the message
        // is the task's only trace, so it goes back for a later delivery (DESIGN.md section 6).
        m.nak(NAK_DELAY_MS);
        this.log.warn('start not carried out: message given back', { taskId: d.taskId, err });
      }
      return;
    }
    // Ack only once start has answered: until then the message is the task's only trace.
    await m.ackAck().catch((err: unknown) => this.log.debug('ack not confirmed', { err }));
    const task: RunningTask = { key, dispatch: d, ac: new AbortController(), why: null };
    this.tasks.set(task.key, task);
    this.starting.delete(key);
    try {
      if (this.releasing) await this.release(task);
      else await this.report(task, await this.execute(task));
    } finally {
      this.tasks.delete(task.key);
    }
  }

  /** Runs the handler, bounded by the step's timeout and by abandonment after an abort. */
  private async execute(task: RunningTask): Promise<Outcome> {
    const d = task.dispatch;
    const timer =
      d.timeoutMs === undefined
        ? undefined
        : setTimeout(() => this.stopTask(task, 'timeout'), d.timeoutMs);
    const ctx: HandlerContext = {
      signal: task.ac.signal,
      runId: d.runId,
      stepId: d.stepId,
      taskId: d.taskId,
      attempt: d.attempt,
      attemptId: d.attemptId,
      ...(d.command !== undefined && { command: d.command }),
    };
    try {
      return await runHandler(this.opts.handler, d.input, ctx, this.opts.killGraceMs + 1_000);
    } finally {
      clearTimeout(timer);
    }
  }

  private stopTask(task: RunningTask, why: StopReason): void {
    if (task.why !== null) return;
    task.why = why;
    task.ac.abort(why);
  }

  private creds(task: RunningTask) {
    const d = task.dispatch;
    return {
      runId: d.runId,
      taskId: d.taskId,
      attemptId: d.attemptId,
      token: d.token,
      workerId: this.workerId,
    };
  }

  private async report(task: RunningTask, outcome: Outcome): Promise<void> {
    const d = task.dispatch;
    switch (task.why) {
      case 'cancel':
        this.log.info('task cancelled', { runId: d.runId, taskId: d.taskId });
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
    const tooBig = outputSizeProblem(bytes.byteLength, this.opts.maxOutputBytes);
    if (tooBig !== null) return this.fail(task, -1, `output ${tooBig}`, false);
    let output: ResultOutput;
    try {
      output = await packOutput(bytes, (b) => this.upload(d, b));
    } catch (err: unknown) {
      this.outputs = null;
      const why = err instanceof Error ? err.message : String(err);
      return this.fail(task, -1, `output upload failed: ${why}`, true);
    }
    await this.send('result', { ...this.creds(task), output }, REPORT_RETRY_MS);
  }

  /**
   * Puts an output over the inline limit where the backend will find it; gives its ref. In
   * secure mode the credential may not write the object store: the output is staged on the
   * worker's own staging subject, and the backend moves it at `result`.
   */
  private async upload(d: DispatchMessage, bytes: Uint8Array): Promise<string> {
    const key = outputKey(d.runId, d.taskId, d.attemptId);
    if (this.credential.mode !== 'secure' || this.opts.outputs || this.opts.s3) {
      return (await this.outputStore()).put(key, bytes);
    }
    await stageOutput(this.jetstream(), this.n.subjects.stage(this.workerId, d.attemptId), bytes);
    return key;
  }

  /**
   * The JetStream client of the worker's connection, under the API prefix its enrollment
   * named: in the workers' account, JetStream is reached through imports under that prefix.
   */
  private jetstream(): JetStreamClient {
    const apiPrefix = this.credential.jsApiPrefix;
    return jetstream(this.nc!, apiPrefix === undefined ? {} : { apiPrefix });
  }

  /** The configured output store, opened on first use (most outputs travel inline). */
  private outputStore(): Promise<OutputStore> {
    this.outputs ??= this.opts.outputs
      ? Promise.resolve(this.opts.outputs)
      : createOutputStore(this.nc!, {
          prefix: this.opts.prefix,
          maxOutputBytes: this.opts.maxOutputBytes,
          ...(this.opts.s3 && { s3: this.opts.s3 }),
        });
    return this.outputs;
  }

  private fail(task: RunningTask, exitCode: number, error: string, retryable: boolean) {
    return this.send(
      'fail',
      { ...this.creds(task), exitCode, error: error.slice(-MAX_ERROR_CHARS), retryable },
      REPORT_RETRY_MS,
    );
  }

  private release(task: RunningTask): Promise<void> {
    this.stopTask(task, 'release');
    return this.send('release', this.creds(task), GOODBYE_RETRY_MS);
  }

  /** Sends a report; a refusal is logged (the task moved on), `conflict` fails the worker. */
  private async send(
    verb: 'result' | 'fail' | 'release',
    body: Parameters<ApiClient['request']>[1],
    retryForMs: number,
  ): Promise<void> {
    const b = body as { runId: string; taskId: string };
    try {
      await this.api!.request(verb, body as never, { retryForMs, signal: this.lifecycle.signal });
      this.log.debug(`task ${verb} sent`, { runId: b.runId, taskId: b.taskId });
    } catch (err: unknown) {
      if (isApiError(err, ErrorCode.Conflict)) await this.failWith(err);
      else
        this.log.warn(`${verb} refused or unanswered`, { runId: b.runId, taskId: b.taskId, err });
    }
  }

  private onCancel(data: Uint8Array): void {
    let raw: unknown;
    try {
      raw = JSON.parse(new TextDecoder().decode(data));
    } catch {
      return;
    }
    const c = cancelControlSchema.safeParse(raw);
    if (!c.success) return;
    for (const task of this.tasks.values()) {
      const d = task.dispatch;
      if (d.runId === c.data.runId && (c.data.taskId === undefined || c.data.taskId === d.taskId)) {
        this.stopTask(task, 'cancel');
      }
    }
  }

  private onSpotNotice(notice: SpotNotice): void {
    const deadline = new Date(Date.parse(notice.time) - this.opts.spotMarginMs);
    this.log.warn('spot interruption notice', { action: notice.action, time: notice.time });
    if (this._state === 'Running') void this.drain('spot-interruption', deadline);
  }

  /**
   * Drains: pulse `active: false`, stop pulling, tell the backend, let running tasks finish
   * until `deadline` (default: now + drain grace), release the rest, leave, delete the
   * registry key. A second call while draining releases at once. Resolves once Stopped.
   *
   * @throws IllegalStateError when the worker already stopped or failed.
   */
  drain(reason: 'shutdown' | 'spot-interruption' = 'shutdown', deadline?: Date): Promise<void> {
    switch (this._state) {
      case 'Draining':
        this.releaseNow();
        return this.done;
      case 'Idle':
        this._state = 'Stopped';
        this.settle.resolve();
        return this.done;
      case 'Running':
        break;
      case 'Stopped':
      case 'Failed':
        return Promise.reject(new IllegalStateError(this._state, 'drain'));
    }
    this._state = 'Draining';
    const at = deadline ?? new Date(Date.now() + this.opts.drainGraceMs);
    void this.drainUntil(reason, at).catch((err: unknown) => this.failWith(err));
    return this.done;
  }

  /** Ends the drain's wait now: what still runs is released. */
  releaseNow(): void {
    this.releasing = true;
    this.releaseTrigger?.();
  }

  private async drainUntil(reason: 'shutdown' | 'spot-interruption', at: Date): Promise<void> {
    this.accepting = false;
    this.spot?.stop();
    this.log.info('worker draining', { reason, deadline: at.toISOString() });
    await this.pulse?.beat().catch((err: unknown) => this.log.warn('pulse failed', { err }));
    try {
      await this.api?.request(
        'drain',
        { workerId: this.workerId, reason, deadline: at.toISOString() },
        { retryForMs: Math.min(GOODBYE_RETRY_MS, Math.max(0, at.getTime() - Date.now())) },
      );
    } catch (err: unknown) {
      if (isApiError(err, ErrorCode.Conflict)) return this.failWith(err);
      this.log.warn('drain not recorded', { err });
    }
    let timer: NodeJS.Timeout | undefined;
    const deadlineCame = new Promise<void>((resolve) => {
      this.releaseTrigger = resolve;
      timer = setTimeout(resolve, Math.max(0, at.getTime() - Date.now()));
      if (this.releasing) resolve();
    });
    await Promise.race([this.idle(), deadlineCame]);
    clearTimeout(timer);
    // From here on, everything shares one stop grace (SONAR_STOP_GRACE): a handler that
    // ignores its abort or an unreachable backend is left behind, never waited for.
    const grace = new Deadline(this.opts.stopGraceMs);
    const bounded = async (what: string, work: Promise<unknown>): Promise<void> => {
      if ((await grace.settle(work)) === 'timeout') {
        this.log.warn('stop grace ran out: left running', { what });
      }
    };
    if (this.handling > 0) {
      this.releasing = true;
      const left = [...this.tasks.values()];
      this.log.info('drain deadline: releasing tasks', { count: left.length });
      await bounded('release', Promise.all(left.map((t) => this.release(t))));
    }
    await bounded('tasks', this.idle());
    await bounded('pulls', Promise.all(this.pullLoops));
    if (this._state !== 'Draining') return; // failed meanwhile
    try {
      await this.api?.request(
        'leave',
        { workerId: this.workerId },
        { retryForMs: Math.min(GOODBYE_RETRY_MS, grace.remainingMs) },
      );
    } catch (err: unknown) {
      this.log.warn('leave not recorded', { err });
    }
    const removed = this.pulse
      ?.remove()
      .catch((err: unknown) => this.log.warn('registry key not deleted', { err }));
    await bounded('registry key', removed ?? Promise.resolve());
    await this.close(grace);
    this._state = 'Stopped';
    this.log.info('worker stopped');
    this.settle.resolve();
  }

  /** Ends the worker as Failed: tasks are abandoned unreported, the reconciler recovers them. */
  private async failWith(err: unknown): Promise<void> {
    if (this._state === 'Stopped' || this._state === 'Failed') return;
    this._state = 'Failed';
    this.accepting = false;
    this.releasing = true;
    this.releaseTrigger?.();
    this.log.error('worker failed', { err });
    for (const t of this.tasks.values()) this.stopTask(t, 'lost');
    this.spot?.stop();
    // Bounded: removing the key waits for the pulse in flight, and a drain for a flush,
    // which a connection the server refuses (a revoked worker's) never gets.
    const grace = new Deadline(this.opts.stopGraceMs);
    await grace.settle(this.pulse?.remove().catch(() => {}) ?? Promise.resolve());
    await this.close(grace);
    this.settle.reject(err);
  }

  private async close(grace?: Deadline): Promise<void> {
    this.lifecycle.abort();
    this.cancelSub?.unsubscribe();
    this.cancelSub = null;
    this.credential.stop();
    if (!this.ownsNc || !this.nc) return;
    const drained = this.nc.drain().catch(() => {});
    // Out of grace: close without flushing.
    if (grace && (await grace.settle(drained)) === 'timeout') await this.nc.close().catch(() => {});
    else await drained;
  }
}

const isConsumerNotFound = (err: unknown): boolean =>
  err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound;

function exitCodeOf(err: unknown): number {
  return err instanceof CommandFailedError ? err.exitCode : -1;
}

/**
 * Creates a worker (not started): `await createWorker({ tags, slots, handler }).run()`.
 * The handler gets the task input and `{ signal, runId, taskId, attemptId, ... }`.
 */
export function createWorker(options: WorkerOptions): Worker {
  return new Worker(options);
}
