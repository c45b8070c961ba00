/**
 * One chaos scenario's world: a fresh topology prefix on a running NATS in secure mode
 * (single server or cluster, see secure-nats.ts), backends and workers as real `sonar`
 * processes, a submitted run, and the read-outs the invariants need (the exported log, the
 * results sink, the leader lock).
 *
 * Every process holds its own role's credential, as in a deployment: backends the backend's
 * (with the worker signing key), workers only the fleet's bootstrap credential (they enroll
 * and connect as themselves), `sonar export` the operator's. The test submits and reads
 * results as a client and reports its workers' exits as a supervisor; it observes (the
 * registry, the leader lock, streams' depths and consumers for its diagnostics) with the
 * backend's credential, since no reader role may list consumers or see every stream.
 */
import { Kvm } from '@nats-io/kv';
import { jetstreamManagerOf, jetstreamOf } from '../../streams/jetstream-api.js';
import type { KV } from '@nats-io/kv';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import type { CredsRole } from '../../src/auth/creds-init.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { EventStore } from '../../streams/event-store.js';
import { splitLines } from '../../streams/jsonl.js';
import { SonarClient } from '../../src/client/client.js';
import type { RunStatus } from '../../src/client/client.js';
import type { RunFile } from '../../src/protocol.js';
import type { StoredResult } from '../../src/storage/results-sink.js';
import { countPgWrites, pgRecords, pgRowCount, pgWrites } from '../helpers/postgres-writes.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { eventually } from '../helpers/eventually.js';
import type { SecureEnvironment } from '../helpers/secure-nats.js';
import { NO_IMDS } from '../helpers/worker-fixtures.js';
import { spawnNode, spawnSonar } from '../helpers/sonar-process.js';
import type { Exit, SonarProcess } from '../helpers/sonar-process.js';

/**
 * Short settings (DESIGN.md section 9), so that every recovery path fires within seconds:
 * a dead worker's key expires after 3 s, its tasks are orphaned 3 s after their start, a
 * dead leader's lock frees after 1 s, a lost finalization lease after 2 s. A pulse TTL of
 * 1.5 s was tried: on this shared 2-core machine under load, live workers missed it.
 */
export const CHAOS_ENV = {
  SONAR_TICK: '200ms',
  SONAR_PULSE_INTERVAL: '500ms',
  SONAR_PULSE_TTL: '3s',
  SONAR_ORPHAN_AGE: '3s',
  SONAR_PUBLISH_TIMEOUT: '5s',
  SONAR_LOCK_TTL: '1s',
  SONAR_FINALIZE_LEASE: '2s',
  SONAR_DRAIN_GRACE: '1s',
  SONAR_IMDS_URL: NO_IMDS,
} as const;

/** A task command that echoes the input back after a pause of `seconds`. */
export function echoCommand(seconds: number): string[] {
  return [
    'sh',
    '-c',
    // A payload marked poison kills the worker that runs it (its parent), every time.
    `read -r x; case "$x" in *poison*) kill -9 $PPID; sleep 5;; esac; sleep ${seconds}; echo "$x"`,
  ];
}

/** The task command every chaos worker runs unless told otherwise: a short pause. */
export const ECHO_COMMAND = echoCommand(0.05);

export const TAG = 'chaos';

/** The one step every chaos and long run has: `work`, on {@link TAG}, JSON outputs. */
export const workRun = (runId: string, tasks: RunFile['steps'][number]['tasks']): RunFile => ({
  runId,
  steps: [{ id: 'work', tags: [TAG], output: 'json', tasks }],
});

/** A run of `count` tasks in one JSON step; `poison` names tasks whose payload kills workers. */
export const chaosRun = (runId: string, count: number, poison: string[] = []): RunFile =>
  workRun(
    runId,
    Array.from({ length: count }, (_, i) => ({
      id: `t${i}`,
      input: poison.includes(`t${i}`) ? { n: i, poison: true } : { n: i },
    })),
  );

export interface WorldOptions {
  /**
   * The secure server or cluster, whose credentials were made for this world's prefix
   * (`startSecureNats({ prefix: freshPrefix() })`): the world's topology lives there.
   */
  secure: SecureEnvironment;
  /** Settings on top of {@link CHAOS_ENV}. */
  env?: Record<string, string>;
}

export interface WorkerOptions {
  slots?: number;
  supervise?: boolean;
  /** The task command (default {@link ECHO_COMMAND}). */
  command?: string[];
}

export interface Backend {
  proc: SonarProcess;
  nodeId: string;
}

const TERMINAL_RUN = new Set(['Succeeded', 'Failed', 'Cancelled']);

export class ChaosWorld {
  readonly backends: Backend[] = [];
  readonly workers: SonarProcess[] = [];
  /** Exits the supervisor saw and reported (see {@link ChaosWorld.startWorker}). */
  readonly exits: { workerId: string; code: number | null; signal: string | null }[] = [];
  /**
   * Exit reports (`exited`, over the supervisor credential) that failed, with why: a refused
   * permission would otherwise hide behind the slower pulse-TTL path to the same recovery.
   */
  readonly exitReportFailures: string[] = [];
  /**
   * Live workers whose key expired (a stall past the pulse TTL on this loaded machine): each
   * learnt it at its next pulse, exited (DESIGN.md section 4), and its supervisor replaced it.
   */
  readonly fenced: string[] = [];
  /** When this world started: a scenario's duration runs from here. */
  readonly startedAt = Date.now();
  /** The run this world submitted last (for diagnostics). */
  runId: string | null = null;
  private stopping = false;
  private workerSeq = 0;
  private backendSeq = 0;
  private locks: Promise<KV> | null = null;

  private constructor(
    /** The settings every process of this world shares (no credential). */
    readonly env: Record<string, string>,
    readonly secure: SecureEnvironment,
    readonly n: Names,
    /** The test's observing connection, as a backend: the registry, the lock, any stream. */
    readonly nc: NatsConnection,
    /** The test's client connection: submits, run status, the results sink. */
    readonly clientNc: NatsConnection,
    /** The supervisor connection that reports a supervised worker's exit. */
    readonly supervisorNc: NatsConnection,
    readonly client: SonarClient,
  ) {}

  static async start(opts: WorldOptions): Promise<ChaosWorld> {
    const { prefix } = opts.secure;
    const env = { ...CHAOS_ENV, SONAR_PREFIX: prefix, ...opts.env };
    // The test's own connections must outlive a server restart too.
    const life: Partial<ConnectionOptions> = { maxReconnectAttempts: -1, reconnectTimeWait: 250 };
    const [nc, clientNc, supervisorNc] = await Promise.all(
      (['backend', 'client', 'supervisor'] as const).map((role) =>
        opts.secure.connectAs(role, life),
      ),
    );
    const client = new SonarClient(clientNc!, { prefix, requestTimeoutMs: 5_000 });
    return new ChaosWorld(env, opts.secure, names(prefix), nc!, clientNc!, supervisorNc!, client);
  }

  /** The environment of a process of `role`: this world's settings and that role's credential. */
  envFor(role: CredsRole): Record<string, string> {
    return { ...this.env, ...this.secure.envFor(role) };
  }

  /**
   * Starts `sonar backend` and waits for its `backend started` line (topology provisioned).
   * With `main`, a test-only backend entry point (a TypeScript file run through tsx) instead.
   */
  async startBackend(
    extraEnv: Record<string, string> = {},
    opts: { main?: string } = {},
  ): Promise<Backend> {
    const name = `backend-${++this.backendSeq}`;
    const env = { ...this.envFor('backend'), ...extraEnv };
    const proc = opts.main
      ? spawnNode(name, ['--import', 'tsx', opts.main], env)
      : spawnSonar(name, ['backend'], env);
    const nodeId = await eventually(
      () => {
        if (!proc.running) throw new Error(`${name} exited:\n${proc.stderr().slice(-2_000)}`);
        const line = logLines(proc).find((l) => l['msg'] === 'backend started');
        return typeof line?.['nodeId'] === 'string' ? line['nodeId'] : false;
      },
      { timeoutMs: 60_000, intervalMs: 100, message: `${name} started` },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${name} stderr:\n${proc.stderr().slice(-3_000)}`);
    });
    const b = { proc, nodeId };
    this.backends.push(b);
    return b;
  }

  /**
   * Starts `sonar worker --tags chaos -- ECHO` with a known id (not waited for), holding the
   * fleet's bootstrap credential only: it enrolls and connects as itself. With
   * `supervise`, this world acts as the worker's supervisor (what `sonar workers` does): when
   * the process dies on its own, it reports `sonar.api.exited` and starts a replacement.
   * A process the test kills on purpose is not reported (its key must expire instead). The
   * report goes over the supervisor credential, as a trusted process manager's would (the
   * threat model: workers on untrusted hosts never hold it).
   */
  startWorker(opts: WorkerOptions = {}): SonarProcess {
    const id = `w${++this.workerSeq}`;
    const slots = String(opts.slots ?? 2);
    const command = opts.command ?? ECHO_COMMAND;
    const proc = spawnSonar(
      id,
      ['worker', '--worker-id', id, '--tags', TAG, '--slots', slots, '--', ...command],
      this.envFor('bootstrap'),
    );
    this.workers.push(proc);
    if (opts.supervise) void proc.exited.then((exit) => this.onWorkerExit(proc, exit, opts));
    return proc;
  }

  /** Each worker's state as its events tell it: `Active`, `Draining`, `Left`, `Lost`. */
  async workerStates(): Promise<Map<string, string>> {
    const states = new Map<string, string>();
    const of: Record<string, string> = {
      WorkerJoined: 'Active',
      WorkerDraining: 'Draining',
      WorkerLeft: 'Left',
      WorkerLost: 'Lost',
    };
    await new EventStore(this.nc, this.n).replay(
      (r) => {
        const state = typeof r.type === 'string' ? of[r.type] : undefined;
        if (state !== undefined) states.set(r.subject.split('.').at(-1)!, state);
      },
      { filter: this.n.subjects.worker('*') },
    );
    return states;
  }

  private async onWorkerExit(proc: SonarProcess, exit: Exit, opts: WorkerOptions): Promise<void> {
    if (this.stopping || proc.killedOnPurpose) return;
    const report = { workerId: proc.name, code: exit.code, signal: exit.signal };
    this.exits.push(report);
    if (/is Lost: its registry key vanished/.test(proc.stderr())) this.fenced.push(proc.name);
    await new ApiClient(this.supervisorNc, this.n)
      .request('exited', report)
      .catch((err: unknown) => this.exitReportFailures.push(`${proc.name}: ${String(err)}`));
    if (!this.stopping) this.startWorker(opts);
  }

  /**
   * Starts `count` backends one at a time, each waited for (see {@link ChaosWorld.startBackend}): the
   * first provisions the topology alone. Two starting at once on a fresh prefix can both find
   * a bucket missing, and the later create then fails on the bucket the first made and
   * already updated (ensureTopology, streams/provision.ts): a race no scenario is about.
   */
  async startBackends(count: number): Promise<Backend[]> {
    const started: Backend[] = [];
    for (let i = 0; i < count; i++) started.push(await this.startBackend());
    return started;
  }

  /**
   * Starts `count` supervised workers (one fenced off as lost exits and is replaced, see
   * docs/faults.md) and waits until every one of them is live.
   */
  async startSupervisedWorkers(
    count: number,
    opts: Omit<WorkerOptions, 'supervise'> = {},
  ): Promise<SonarProcess[]> {
    const procs = Array.from({ length: count }, () =>
      this.startWorker({ ...opts, supervise: true }),
    );
    await this.waitWorkersLive(procs);
    return procs;
  }

  /** Waits until every one of `procs` has its key in the registry (joined and pulsing). */
  async waitWorkersLive(procs: SonarProcess[], timeoutMs = 60_000): Promise<void> {
    const kv = await new Kvm(await jetstreamOf(this.nc, this.n)).open(this.n.buckets.workers);
    await eventually(
      async () => {
        const keys = new Set<string>();
        for await (const k of await kv.keys()) keys.add(k);
        const missing = procs.filter((p) => !keys.has(p.name));
        for (const p of missing) {
          if (!p.running) throw new Error(`${p.name} exited:\n${p.stderr().slice(-2_000)}`);
        }
        return missing.length === 0;
      },
      { timeoutMs, intervalMs: 200, message: `${procs.length} workers live` },
    );
    // Secure mode is in force: each enrolled and holds a credential of its own, not the
    // bootstrap one it started with.
    for (const p of procs) {
      if (!p.stderr().includes('connected with its own credential')) {
        throw new Error(
          `${p.name} is live without its own credential:\n${p.stderr().slice(-2_000)}`,
        );
      }
    }
  }

  /** The nodeId holding the reconciler lock, or null. */
  async leader(): Promise<string | null> {
    this.locks ??= jetstreamOf(this.nc, this.n).then((js) =>
      new Kvm(js).open(this.n.buckets.locks),
    );
    const e = await (await this.locks).get('reconciler');
    return e?.operation === 'PUT' ? e.string() : null;
  }

  /**
   * Results finalized so far: the sink bucket's message count (history 1, one per task), from
   * its stream info, as a client (the role that reads results).
   */
  async finalizedCount(): Promise<number> {
    const url = this.env['SONAR_RESULTS_URL'];
    if (url !== undefined) return pgRowCount(url, this.n.prefix);
    const jsm = await jetstreamManagerOf(this.clientNc, this.n);
    const info = await jsm.streams.info(`KV_${this.n.buckets.results}`);
    return info.state.messages;
  }

  /** Waits until at least `count` results are in the sink. */
  async waitFinalized(count: number, timeoutMs = 120_000): Promise<void> {
    await eventually(async () => (await this.finalizedCount()) >= count, {
      timeoutMs,
      intervalMs: 100,
      message: `${count} results finalized`,
    }).catch(async (err: unknown) => this.failWithDiagnosis(err));
  }

  /** Whether at least `count` results are in the sink within `ms` (a bounded fault window). */
  async finalizedWithin(count: number, ms: number): Promise<boolean> {
    return eventually(async () => (await this.finalizedCount()) >= count, {
      timeoutMs: ms,
      intervalMs: 100,
    }).then(
      () => true,
      () => false,
    );
  }

  /** Rethrows `err` with what the world looks like (see diagnose.ts). */
  private async failWithDiagnosis(err: unknown): Promise<never> {
    const { diagnose } = await import('./diagnose.js');
    throw new Error(`${String(err)}\n${await diagnose(this, this.runId ?? '')}`, { cause: err });
  }

  /** Submits a run file through the client SDK. */
  async submit(file: RunFile): Promise<void> {
    this.runId = file.runId;
    await this.client.submit(file);
  }

  /**
   * The run's status, through a fresh client each time: EventStore caches its JetStream
   * manager promise, and one made while the server was down stays rejected.
   */
  status(runId: string): Promise<RunStatus> {
    const read = new SonarClient(this.clientNc, { prefix: this.n.prefix }).status(runId);
    // A read whose ordered consumer sat on a node that died never ends: give up on it, the
    // caller polls again with a new consumer.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('status read timed out')), 10_000);
    });
    return Promise.race([read, timeout]).finally(() => clearTimeout(timer));
  }

  /** Waits for the run to end (Succeeded, Failed or Cancelled) and returns its status. */
  async waitRunEnded(runId: string, timeoutMs = 180_000): Promise<RunStatus> {
    return eventually(
      async () => {
        const s = await this.status(runId);
        return s.state !== null && TERMINAL_RUN.has(s.state) ? s : false;
      },
      { timeoutMs, intervalMs: 1_000, message: `run ${runId} ended` },
    ).catch(async (err: unknown) => this.failWithDiagnosis(err));
  }

  /** `sonar export` as a real process, as an operator: the JSONL lines of the whole prefix. */
  async exportLog(): Promise<string[]> {
    const proc = spawnSonar('export', ['export'], this.envFor('operator'));
    const exit = await proc.exited;
    if (exit.code !== 0) throw new Error(`sonar export failed: ${proc.stderr().slice(-2_000)}`);
    return splitLines(proc.stdout());
  }

  /**
   * Every record in the results sink, and how many writes the sink's stream ever took: read
   * as a client (`sonar results` reads the same bucket).
   */
  async sink(): Promise<{ records: Map<string, StoredResult>; writes: number }> {
    const url = this.env['SONAR_RESULTS_URL'];
    if (url !== undefined) {
      const records = await pgRecords(url, this.n.prefix);
      return { records, writes: await pgWrites(url, this.n.prefix) };
    }
    const kv = await new Kvm(await jetstreamOf(this.clientNc, this.n)).open(this.n.buckets.results);
    const records = new Map<string, StoredResult>();
    for await (const key of await kv.keys()) {
      const e = await kv.get(key);
      if (e?.operation === 'PUT') records.set(key, e.json<StoredResult>());
    }
    const jsm = await jetstreamManagerOf(this.clientNc, this.n);
    // History 1 keeps one message per key, but last_seq counts every write ever made.
    const writes = (await jsm.streams.info(`KV_${this.n.buckets.results}`)).state.last_seq;
    return { records, writes };
  }

  /**
   * With `SONAR_RESULTS_URL`: makes the results table now (as a backend would on its first
   * write) and counts every row written from then on (see postgres-writes.ts), so that
   * {@link ChaosWorld.sink} can tell a rewrite. Call before the backends start.
   */
  async countResultWrites(): Promise<void> {
    const url = this.env['SONAR_RESULTS_URL'];
    if (url === undefined)
      throw new Error('countResultWrites: this world has no SONAR_RESULTS_URL');
    await countPgWrites(url, this.n.prefix);
  }

  /** SIGKILLs every process of this world and closes its connections. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([
      ...this.workers.map((w) => w.kill('SIGKILL')),
      ...this.backends.map((b) => b.proc.kill('SIGKILL')),
    ]);
    await Promise.all(
      [this.nc, this.clientNc, this.supervisorNc].map((c) => c.close().catch(() => {})),
    );
  }
}

/** A process's stderr as parsed JSON log lines (unparseable lines are dropped). */
export function logLines(proc: SonarProcess): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of proc.stderr().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line cut by a kill
    }
  }
  return out;
}
