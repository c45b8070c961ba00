import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync } from 'node:fs';
import { hostname } from 'node:os';
import { isSonarError, ErrorCode } from '../../actors/errors.js';
import { hostToken, newId } from '../ids.js';
import type { Logger } from '../log.js';
import { silentLogger } from '../log.js';
import type { ApiClient } from '../worker/api-client.js';
import { processEnvironment } from '../config.js';
// `bin/sonar.js`: children run the same CLI as the supervisor.
import { SONAR_BIN } from '../package-info.js';

/** One supervised worker slot: the supervisor keeps exactly one child running per spec. */
export interface WorkerSpec {
  tags: string[];
  slots: number;
  /** `-- CMD ARGS` for every task; unset: each task's own command. */
  command?: string[];
  /** Extra `sonar worker` flags, e.g. `['--no-spot']`. */
  args?: string[];
}

/** What the supervisor saw, for logs and the `sonar dev` display. */
export type SupervisorEvent =
  | { type: 'spawned'; slot: number; workerId: string; pid: number; spec: WorkerSpec }
  | {
      type: 'exited';
      slot: number;
      workerId: string;
      pid: number;
      code: number | null;
      signal: NodeJS.Signals | null;
    }
  /** `sonar.api.exited` answered (`outcome: 'reported'`) or could not be sent. */
  | { type: 'reported'; workerId: string; outcome: 'reported' | 'not-joined' | 'failed' }
  | { type: 'respawning'; slot: number; afterMs: number };

export interface SupervisorOptions {
  specs: WorkerSpec[];
  /** Sends `sonar.api.exited`; its prefix and server are the children's too. */
  api: ApiClient;
  /** Environment of every child on top of this process's (SONAR_NATS_URL, SONAR_PREFIX...). */
  env?: Record<string, string>;
  /**
   * Children's stdout/stderr: `inherit`, `ignore`, or a function giving a file descriptor per
   * worker id (`sonar dev` writes each worker's log under `.sonar/logs/`).
   * @defaultValue `inherit`
   */
  output?: 'inherit' | 'ignore' | ((workerId: string) => number);
  /**
   * First respawn delay of a child that died young; doubles per quick death, capped.
   * @defaultValue 500
   */
  backoffBaseMs?: number;
  /** @defaultValue 30000 */
  backoffCapMs?: number;
  /**
   * A child that lived this long is respawned at once and its backoff resets.
   * @defaultValue 10000
   */
  stableAfterMs?: number;
  /**
   * How long `stop()` waits for draining children before SIGKILL.
   * @defaultValue 30000
   */
  stopTimeoutMs?: number;
  onEvent?: (e: SupervisorEvent) => void;
  log?: Logger;
}

interface Slot {
  index: number;
  spec: WorkerSpec;
  child: ChildProcess | null;
  workerId: string | null;
  startedAt: number;
  quickDeaths: number;
  timer: NodeJS.Timeout | null;
  exited: Promise<void>;
}

// Children still running when this process exits (an error, a forgotten stop()) go with it.
const liveChildren = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of liveChildren) c.kill('SIGKILL');
});

/** A fresh worker id: a restarted process never reuses one (DESIGN.md section 4). */
const freshWorkerId = (): string => `${hostToken(hostname(), 30)}-${newId().slice(-10)}`;

/**
 * Runs local worker processes (`sonar worker`) and keeps them running (supervised
 * liveness). When a child ends, by exit or signal, the supervisor requests `sonar.api.exited`
 * at once: the backend appends `WorkerLost{exited}` and the reconciler requeues its tasks
 * without waiting out the registry TTL or orphanAge, since the process is known to be gone.
 * The slot is then respawned with a fresh worker id, with backoff while children keep dying
 * young. `stop()` forwards SIGTERM (children drain and leave) and waits. When the supervisor
 * itself dies without a stop (SIGKILL, a crash), its children see their IPC channel close and
 * drain the same way.
 */
export class Supervisor {
  private readonly slots: Slot[];
  private readonly log: Logger;
  private stopping = false;
  /** Reports sent before `stop()`: stop cuts their retries short. */
  private readonly reporting = new Set<AbortController>();
  private readonly listeners = new Set<(e: SupervisorEvent) => void>();

  constructor(private readonly opts: SupervisorOptions) {
    this.log = opts.log ?? silentLogger;
    this.slots = opts.specs.map((spec, index) => ({
      index,
      spec,
      child: null,
      workerId: null,
      startedAt: 0,
      quickDeaths: 0,
      timer: null,
      exited: Promise.resolve(),
    }));
  }

  /** Listens to what the supervisor sees (besides `onEvent`); returns the unsubscribe. */
  subscribe(listener: (e: SupervisorEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  private emit(e: SupervisorEvent): void {
    this.opts.onEvent?.(e);
    for (const l of this.listeners) l(e);
  }

  start(): void {
    for (const s of this.slots) this.spawn(s);
  }

  /** The running children: worker id, pid, slot. */
  children(): { workerId: string; pid: number; slot: number; spec: WorkerSpec }[] {
    return this.slots.flatMap((s) =>
      s.child?.pid !== undefined && s.workerId !== null
        ? [{ workerId: s.workerId, pid: s.child.pid, slot: s.index, spec: s.spec }]
        : [],
    );
  }

  /** Signals the child running `workerId` (the demo's SIGKILL). False when no such child. */
  kill(workerId: string, signal: NodeJS.Signals = 'SIGKILL'): boolean {
    const slot = this.slots.find((s) => s.workerId === workerId && s.child !== null);
    return slot?.child?.kill(signal) ?? false;
  }

  /** SIGTERM to every child (they drain), then waits; SIGKILL after `stopTimeoutMs`. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const r of this.reporting) r.abort();
    for (const s of this.slots) {
      if (s.timer) clearTimeout(s.timer);
      s.child?.kill('SIGTERM');
    }
    const all = Promise.all(this.slots.map((s) => s.exited));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), this.opts.stopTimeoutMs ?? 30_000);
    });
    if ((await Promise.race([all, late])) === 'late') {
      this.log.warn('workers did not drain in time: killed');
      for (const s of this.slots) s.child?.kill('SIGKILL');
      await all;
    }
    clearTimeout(timer);
  }

  private spawn(slot: Slot): void {
    if (this.stopping) return;
    const workerId = freshWorkerId();
    const { spec } = slot;
    const args = [
      SONAR_BIN,
      'worker',
      '--worker-id',
      workerId,
      '--tags',
      spec.tags.join(','),
      '--slots',
      String(spec.slots),
      ...(spec.args ?? []),
      ...(spec.command ? ['--', ...spec.command] : []),
    ];
    const output = this.opts.output ?? 'inherit';
    const fd = typeof output === 'function' ? output(workerId) : output;
    // Its own process group: a Ctrl-C in the terminal reaches only the supervisor, which then
    // sends one SIGTERM (a second signal would make a worker release its tasks at once).
    // The IPC channel is how a child learns that this process died, even by SIGKILL: the
    // kernel closes the channel, and `sonar worker` drains on its 'disconnect', as on SIGTERM,
    // instead of running on with nobody to report it. Nothing is sent over it.
    const child = spawn(process.execPath, args, {
      env: processEnvironment.forChild(this.opts.env),
      stdio: ['ignore', fd, fd, 'ipc'],
      detached: true,
    });
    liveChildren.add(child);
    child.once('exit', () => liveChildren.delete(child));
    // The child holds its own copy of a log file's descriptor.
    if (typeof fd === 'number') closeSync(fd);
    slot.child = child;
    slot.workerId = workerId;
    slot.startedAt = performance.now();
    slot.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        void this.onExit(slot, child, workerId, code, signal).finally(resolve);
      });
      child.once('error', (err) => {
        // Spawn failed (no 'exit' follows): count it as a quick death.
        if (child.pid === undefined) {
          this.log.error('worker could not start', { workerId, err });
          void this.onExit(slot, child, workerId, null, null).finally(resolve);
        }
      });
    });
    if (child.pid !== undefined) {
      this.log.info('worker spawned', { workerId, pid: child.pid, tags: spec.tags });
      this.emit({ type: 'spawned', slot: slot.index, workerId, pid: child.pid, spec });
    }
  }

  private async onExit(
    slot: Slot,
    child: ChildProcess,
    workerId: string,
    code: number | null,
    signal: NodeJS.Signals | null,
  ): Promise<void> {
    if (slot.child === child) slot.child = null;
    const pid = child.pid ?? -1;
    this.log.info('worker exited', { workerId, pid, code, signal });
    this.emit({ type: 'exited', slot: slot.index, workerId, pid, code, signal });
    // Respawn first: the report may wait on a backend that is busy or restarting.
    this.scheduleRespawn(slot);
    await this.report(workerId, code, signal);
  }

  private async report(
    workerId: string,
    code: number | null,
    signal: NodeJS.Signals | null,
  ): Promise<void> {
    const abort = new AbortController();
    this.reporting.add(abort);
    try {
      // While stopping, the backend may be going too: do not hold the shutdown for long.
      await this.opts.api.request(
        'exited',
        { workerId, code, signal },
        this.stopping ? { retryForMs: 2_000 } : { signal: abort.signal },
      );
      this.emit({ type: 'reported', workerId, outcome: 'reported' });
    } catch (err: unknown) {
      // A child that died before its join left nothing to recover.
      const notJoined = isSonarError(err, ErrorCode.NotFound);
      if (!notJoined) this.log.warn('exited not reported', { workerId, err });
      this.emit({
        type: 'reported',
        workerId,
        outcome: notJoined ? 'not-joined' : 'failed',
      });
    } finally {
      this.reporting.delete(abort);
    }
  }

  private scheduleRespawn(slot: Slot): void {
    if (this.stopping) return;
    const lived = performance.now() - slot.startedAt;
    if (lived >= (this.opts.stableAfterMs ?? 10_000)) slot.quickDeaths = 0;
    else slot.quickDeaths++;
    const base = this.opts.backoffBaseMs ?? 500;
    const cap = this.opts.backoffCapMs ?? 30_000;
    const afterMs =
      slot.quickDeaths === 0 ? 0 : Math.min(cap, base * 2 ** Math.min(slot.quickDeaths - 1, 20));
    this.emit({ type: 'respawning', slot: slot.index, afterMs });
    slot.timer = setTimeout(() => {
      slot.timer = null;
      this.spawn(slot);
    }, afterMs);
  }
}
