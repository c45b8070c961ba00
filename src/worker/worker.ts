import { hostname } from 'node:os';
import { jetstream } from '@nats-io/jetstream';
import type { Consumer, JetStreamClient } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { ErrorCode } from '../../actors/errors.js';
import { assertId } from '../../actors/ids.js';
import { isConsumerNotFoundApiError } from '../../streams/errors.js';
import { names, workerInboxPrefix } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { hostToken, newId } from '../ids.js';
import { assertSlotsFit, DEFAULT_MAX_PAYLOAD } from '../pulse-size.js';
import type { Logger } from '../log.js';
import { connectNats, drainAndClose } from '../nats.js';
import { WorkerCredential } from './credential.js';
import { isAuthError, isExpiredCredential } from './auth-errors.js';
import { PULL_MIN_EXPIRES_MS } from '../protocol.js';
import type { CredentialReply, DispatchMessage, JoinReply, RegistryEntry } from '../protocol.js';
import { createOutputStore } from '../storage/create-output-store.js';
import { stageOutput } from '../storage/staged-output.js';
import { outputKey } from '../storage/output-store.js';
import type { OutputStore } from '../storage/output-store.js';
import { ApiClient, isApiError } from './api-client.js';
import { BackendSource } from './backend-pull.js';
import { ConsumerSource } from './dispatch-source.js';
import type { DispatchSource } from './dispatch-source.js';
import { createActor } from 'xstate';
import { drainWorker } from './drain.js';
import { IllegalStateError } from './errors.js';
import {
  isAccepting,
  isEnded,
  isReleasing,
  lifecycleMachine,
  workerStateOf,
} from './lifecycle.machine.js';
import type { DrainReason, LifecycleSnapshot, WorkerState } from './lifecycle.machine.js';
import { resolveWorkerOptions } from './options.js';
import type { ResolvedWorkerOptions, WorkerOptions } from './options.js';
import { Pulse } from './pulse.js';
import type { Standing } from './pulse.js';
import { Slots } from './slots.js';
import { untilAnswered } from './start-wait.js';
import { ImdsClient, SpotNoticeWatcher } from './spot-notice.js';
import type { SpotNotice } from './spot-notice.js';
import { GOODBYE_RETRY_MS, NAK_DELAY_MS, TaskExecution } from './task-execution.js';
import { Deadline } from '../grace.js';

export type { WorkerState } from './lifecycle.machine.js';

/** Binding to a consumer found gone just after join: join again this many times, at most. */
const BIND_ATTEMPTS = 3;

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
  private readonly lifecycle = createActor(lifecycleMachine).start();
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
  private execution: TaskExecution | null = null;
  private pullLoops: Promise<void>[] = [];
  /** A join sent again to have a vanished dispatch consumer recreated, while in flight. */
  private rejoining: Promise<void> | null = null;
  /** Aborted when the worker stops or fails: ends retries of its requests. */
  private readonly ended = new AbortController();

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
    return workerStateOf(this.snapshot());
  }

  /** Tasks started and not yet reported. */
  get running(): number {
    return this.execution?.running ?? 0;
  }

  private snapshot(): LifecycleSnapshot {
    return this.lifecycle.getSnapshot();
  }

  private get accepting(): boolean {
    return isAccepting(this.snapshot());
  }

  /**
   * Starts, then resolves once drained (rejects when the worker failed). Until then SIGTERM
   * and SIGINT drain it (`signals: false` leaves them to the caller; a list names others): the
   * first signal drains, letting running tasks finish within the drain grace; a second one
   * releases them at once.
   */
  async run(opts: { signals?: boolean | readonly NodeJS.Signals[] } = {}): Promise<void> {
    const signals =
      opts.signals === false
        ? []
        : opts.signals === true || !opts.signals
          ? DRAIN_SIGNALS
          : opts.signals;
    const onSignal = (signal: NodeJS.Signals): void => {
      this.log.info('signal: draining (a second one releases running tasks)', { signal });
      void this.drain('shutdown').catch(() => undefined);
    };
    for (const s of signals) process.on(s, onSignal);
    try {
      await this.start();
      await this.done;
    } finally {
      for (const s of signals) process.off(s, onSignal);
    }
  }

  /**
   * Joins and starts pulling. Rejects (and the worker is Failed) when the join is refused.
   * @throws IllegalStateError unless Idle.
   */
  async start(): Promise<void> {
    if (!this.snapshot().matches('Idle')) throw new IllegalStateError(this.state, 'start');
    this.lifecycle.send({ type: 'start' });
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
      if (!this.ended.signal.aborted) {
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
      this.ended.signal,
      () => this.enrollAgain(),
      // Fenced by the backend (revoked, Lost or Left): it removed the registry key itself.
      (err) => {
        void this.failWith(err, { removeKey: false });
      },
    );
    this.execution = new TaskExecution({
      workerId: this.workerId,
      opts: o,
      log: this.log,
      api: this.api,
      signal: this.ended.signal,
      upload: (d, bytes) => this.upload(d, bytes),
      uploadFailed: () => {
        this.outputs = null;
      },
      accepting: () => this.accepting,
      releasing: () => isReleasing(this.snapshot()),
      conflict: (err) => this.failWith(err),
    });
    const imds = o.spot === false ? null : new ImdsClient(o.imdsUrl, 1_000);
    const spotOn = imds !== null && (o.spot === true || (await imds.available()));
    if (imds && spotOn && this.instanceId === undefined) {
      this.instanceId =
        (await imds.get('/latest/meta-data/instance-id').catch(() => null)) ?? undefined;
    }
    const api = this.api;
    const waiting = { log: this.log, signal: this.ended.signal };
    let joinSentAt = 0;
    const reply = await untilAnswered(
      'join',
      () => {
        joinSentAt = performance.now();
        return api.request<'join', JoinReply>('join', this.joinRequest(), {
          signal: this.ended.signal,
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
        if (s.type === 'reconnect' && this.state === 'Running') {
          this.pulse?.beat().catch((err: unknown) => this.log.warn('pulse failed', { err }));
        }
      }
    })().catch(() => {});
    this.cancelSub = nc.subscribe(this.n.subjects.controlCancel, {
      callback: (err, msg) => {
        if (!err) this.execution?.onCancel(msg);
      },
    });
    const sources = await this.dispatchSources(reply, waiting);
    if (!this.snapshot().matches('Joining')) return; // drained or failed while joining
    this.lifecycle.send({ type: 'joined' });
    this.pullLoops = sources.map((source) => this.pullLoop(source));
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
        () => this.credential.enroll(bootApi, this.ended.signal),
        { log: this.log, signal: this.ended.signal },
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
        { signal: this.ended.signal },
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
        signal: this.ended.signal,
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
   * Where each tag's messages come from: a backend that pulls for this worker, when the
   * enrollment named a pull subject (its credential may not pull itself); else the tag's
   * consumer.
   */
  private async dispatchSources(
    reply: JoinReply,
    waiting: Parameters<typeof untilAnswered>[2],
  ): Promise<DispatchSource[]> {
    const { tags } = this.opts;
    const pullSubject = this.credential.pullSubject;
    if (pullSubject !== undefined) {
      return tags.map((t) => new BackendSource(this.nc!, `${pullSubject}.${t}`));
    }
    const js = this.jetstream();
    return Promise.all(
      tags.map(async (t) => {
        const name = reply.consumers[t] ?? this.n.consumers.dispatch(t);
        const consumer = await untilAnswered(
          `consumer of tag ${t}`,
          () => this.bind(js, reply.stream, name),
          waiting,
        );
        return new ConsumerSource(consumer);
      }),
    );
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
        if (!isConsumerNotFoundApiError(err) || attempt >= BIND_ATTEMPTS) throw err;
        await this.rejoin();
      }
    }
  }

  /** After a failed pull: whether the consumer was gone (and the join was sent again). */
  private async rejoinIfGone(source: DispatchSource, err: unknown): Promise<boolean> {
    if (!(await source.gone(err))) return false;
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
        await this.api!.request('join', this.joinRequest(), { signal: this.ended.signal });
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
      active: this.state === 'Running',
      running: this.execution?.held() ?? [],
    };
  }

  /**
   * One tag's loop: take a free slot (waiting for one), plus this tag's share of the other
   * free slots, then pull that many messages in one request; never more than `slots` held.
   * Why a batch: one `next()` per message costs a pull round trip each, and a loop waiting on
   * it cannot ask for more, so a busy worker pulled one message per round trip.
   */
  private async pullLoop(source: DispatchSource): Promise<void> {
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
        const batch = await source.pull(taken, await this.pullExpiry());
        for await (const m of batch) {
          if (got >= taken) {
            m.nak(); // more than asked for: a backend relaying twice after a reconnect
            continue;
          }
          got++;
          void this.execution!.handle(m).finally(() => this.slots.release());
          // Draining: what this batch still has coming would only be nak'ed.
          if (!this.accepting) await batch.close();
        }
      } catch (err: unknown) {
        giveBack(taken - got);
        got = taken;
        if (!this.accepting) break;
        if (!(await this.rejoinIfGone(source, err))) this.log.warn('pull failed', { err });
        if (!this.accepting) break;
        await new Promise((r) => setTimeout(r, NAK_DELAY_MS));
      }
      giveBack(taken - got);
    }
  }

  /**
   * How long the next pull may wait: its setting, cut so that the pull ends before the
   * server closes the connection at its JWT's expiry (a renewed JWT is presented only at the
   * reconnect). Answers relayed across that close would be lost, and their messages would
   * wait out the ack wait; so near the close this waits for the reconnect instead.
   */
  private async pullExpiry(): Promise<number> {
    for (;;) {
      const room = this.credential.msUntilCut() - CUT_MARGIN_MS;
      if (room >= PULL_MIN_EXPIRES_MS || !this.accepting) {
        return Math.max(PULL_MIN_EXPIRES_MS, Math.min(this.opts.pullExpiresMs, room));
      }
      await new Promise((r) => setTimeout(r, CUT_POLL_MS));
    }
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

  private onSpotNotice(notice: SpotNotice): void {
    const deadline = new Date(Date.parse(notice.time) - this.opts.spotMarginMs);
    this.log.warn('spot interruption notice', { action: notice.action, time: notice.time });
    if (this.state === 'Running') void this.drain('spot-interruption', deadline);
  }

  /**
   * Drains: pulse `active: false`, stop pulling, tell the backend, let running tasks finish
   * until `deadline` (default: now + drain grace), release the rest, leave, delete the
   * registry key (./drain.ts). A second call while draining releases at once. Resolves once
   * Stopped.
   *
   * @throws IllegalStateError when the worker already stopped or failed.
   */
  drain(reason: DrainReason = 'shutdown', deadline?: Date): Promise<void> {
    const before = this.snapshot();
    if (isEnded(before)) return Promise.reject(new IllegalStateError(this.state, 'drain'));
    const at = deadline ?? new Date(Date.now() + this.opts.drainGraceMs);
    this.lifecycle.send({ type: 'drain', reason, deadline: at.toISOString() });
    if (before.matches('Draining')) return this.done;
    if (this.snapshot().matches('Stopped')) {
      this.settle.resolve(); // drained before it started
      return this.done;
    }
    void drainWorker(
      {
        workerId: this.workerId,
        log: this.log,
        lifecycle: this.lifecycle,
        stopGraceMs: this.opts.stopGraceMs,
        api: this.api,
        execution: this.execution,
        pullLoops: () => this.pullLoops,
        stopSpotWatch: () => this.spot?.stop(),
        beat: () => this.pulse?.beat() ?? Promise.resolve(),
        leaving: () => this.pulse?.leaving(),
        removeKey: () => this.pulse?.remove() ?? Promise.resolve(),
        close: (grace) => this.close(grace),
        conflict: (err) => this.failWith(err),
      },
      reason,
      at,
    )
      .then(() => {
        if (this.snapshot().matches('Stopped')) this.settle.resolve();
      })
      .catch((err: unknown) => this.failWith(err));
    return this.done;
  }

  /** Ends the drain's wait now: what still runs is released. */
  releaseNow(): void {
    this.lifecycle.send({ type: 'release' });
  }

  /**
   * Ends the worker as Failed: tasks are abandoned unreported, the reconciler recovers them.
   * `removeKey: false` when the backend fenced this worker's credential (revoked, Lost or
   * Left): it removed the key when it declared the worker Lost (and the key's TTL ends it in
   * any case), and a revoked worker's connection, which the server now refuses, would only
   * spend the stop grace trying.
   */
  private async failWith(err: unknown, how = { removeKey: true }): Promise<void> {
    if (isEnded(this.snapshot())) return;
    this.lifecycle.send({ type: 'fail', error: err });
    this.log.error('worker failed', { err });
    this.execution?.abandonAll();
    this.spot?.stop();
    // Bounded: removing the key waits for the pulse in flight, and a drain for a flush,
    // which a connection the server refuses never gets.
    const grace = new Deadline(this.opts.stopGraceMs);
    if (how.removeKey) {
      await grace.settle(this.pulse?.remove().catch(() => {}) ?? Promise.resolve());
    } else {
      this.log.info('registry key left to the backend: it fenced this worker');
    }
    await this.close(grace);
    this.settle.reject(err);
  }

  private async close(grace?: Deadline): Promise<void> {
    this.ended.abort();
    this.cancelSub?.unsubscribe();
    this.cancelSub = null;
    this.credential.stop();
    if (!this.ownsNc || !this.nc) return;
    await drainAndClose(this.nc, grace);
  }
}

/** How long before its JWT's expiry a worker's pull must have ended: relay time and skew. */
const CUT_MARGIN_MS = 500;
/** How often a worker waiting out its connection's close looks again. */
const CUT_POLL_MS = 50;

/** What a process manager sends to stop a worker: the container runtime, and Ctrl-C. */
const DRAIN_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

/**
 * Creates a worker (not started): `await createWorker({ tags, slots, handler }).run()`.
 * The handler gets the task input and `{ signal, runId, taskId, attemptId, ... }`.
 */
export function createWorker<I = unknown, O = unknown>(options: WorkerOptions<I, O>): Worker {
  // The handler's input type is the schema's output (checked at run time), or the caller's word.
  return new Worker(options as unknown as WorkerOptions);
}
