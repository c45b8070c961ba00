/**
 * Child processes of the end-to-end bench: the backend (`node bin/sonar.js backend`, as an
 * operator runs it) and SDK workers (bench/e2e/worker-child.mjs). Only pids spawned here are
 * ever signalled.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** A spawned node process whose output lines are kept (JSON log lines on stderr). */
export class Child {
  readonly lines: string[] = [];
  readonly exited: Promise<number | null>;
  private watchers: { match: (line: string) => boolean; resolve: (line: string) => void }[] = [];

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
    for (const s of [proc.stdout, proc.stderr]) {
      if (!s) continue;
      createInterface({ input: s }).on('line', (line) => {
        this.lines.push(line);
        if (this.lines.length > 2_000) this.lines.splice(0, 1_000);
        this.watchers = this.watchers.filter((w) => {
          if (!w.match(line)) return true;
          w.resolve(line);
          return false;
        });
      });
    }
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** The first line from now on that matches, or a rejection naming the recent output. */
  waitForLine(match: (line: string) => boolean, timeoutMs = 60_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`${this.name}: no matching line in ${timeoutMs} ms\n${this.tail()}`));
      }, timeoutMs);
      const done = (line: string) => {
        clearTimeout(timer);
        resolve(line);
      };
      this.watchers.push({ match, resolve: done });
      void this.exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${code}) before the line came\n${this.tail()}`));
      });
    });
  }

  /** The JSON log lines seen so far with this `msg`, parsed. */
  logs(msg: string): Record<string, unknown>[] {
    return this.lines.filter((l) => l.includes(`"msg":"${msg}"`)).map(parseLog);
  }

  /** The first JSON log line with this `msg` (one already seen, or the next), parsed. */
  async waitForLog(msg: string, timeoutMs?: number): Promise<Record<string, unknown>> {
    const seen = this.logs(msg)[0];
    if (seen) return seen;
    return parseLog(await this.waitForLine((l) => l.includes(`"msg":"${msg}"`), timeoutMs));
  }

  tail(): string {
    return this.lines.slice(-20).join('\n');
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill(signal);
    await this.exited;
  }
}

const parseLog = (line: string) => JSON.parse(line) as Record<string, unknown>;

/**
 * `--cpu-prof` into `<dir>/<name>/` when profiling: one folder per process, since its tsx
 * loader thread writes a profile too (the main thread's file name has thread id 0).
 */
const profArgs = (dir: string | undefined, name: string) =>
  dir ? ['--cpu-prof', `--cpu-prof-dir=${join(dir, name)}`] : [];

/** The node flags of bin/sonar.js's shebang (`#!/usr/bin/env -S node <flags>`). */
function shebangFlags(): string[] {
  const first = readFileSync(join(root, 'bin/sonar.js'), 'utf8').split('\n')[0] ?? '';
  return first.split(/\s+/).slice(first.split(/\s+/).indexOf('node') + 1);
}

/**
 * `bin/sonar.js backend` as an operator runs it, with its shebang's node flags, and `env`
 * (SONAR_* settings); resolved once it logs `backend started`. Run through `node` with the
 * same flags so that `--cpu-prof` can be added (NODE_OPTIONS refuses it).
 */
export async function startBackend(
  env: Record<string, string>,
  profDir?: string,
  name = 'backend',
): Promise<Child> {
  const args = [...shebangFlags(), ...profArgs(profDir, name), 'bin/sonar.js', 'backend'];
  const proc = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, SONAR_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const child = new Child(name, proc);
  await child.waitForLog('backend started');
  return child;
}

/** An SDK worker with the bench's trivial handler; resolved once it has joined. */
export async function startWorker(
  url: string,
  prefix: string,
  slots: number,
  workerId: string,
  profDir?: string,
): Promise<Child> {
  const proc = spawn(
    process.execPath,
    [
      ...profArgs(profDir, workerId),
      'bench/e2e/worker-child.mjs',
      url,
      prefix,
      String(slots),
      workerId,
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const child = new Child(workerId, proc);
  await child.waitForLine((l) => l === 'ready');
  return child;
}

/** Resident and peak resident memory of a process, in MiB (Linux /proc). */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

/** CPU seconds (user + system) a process has used so far (Linux /proc, 100 ticks/s). */
export function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
