/**
 * Real `sonar` processes for the chaos, access-control and CLI tests: `node bin/sonar.js
 * <verb> ...`, signalled by their own pid only. Every process spawned here is SIGKILLed when
 * the test process exits, so a failed test leaves nothing running.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { ROOT, SONAR_BIN } from './worker-fixtures.js';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One spawned `sonar` process. */
export interface SonarProcess {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Resolves when the process has exited. */
  readonly exited: Promise<Exit>;
  readonly running: boolean;
  /** True once {@link SonarProcess.kill} was called: the test, not a fault of its own. */
  readonly killedOnPurpose: boolean;
  /** When the process exited (ms since the epoch), or null while it runs. */
  readonly exitedAt: number | null;
  /** Everything the process wrote to stderr (its JSON log lines). */
  stderr(): string;
  stdout(): string;
  /** Signals this process (default SIGKILL) and waits for its exit. */
  kill(signal?: NodeJS.Signals): Promise<Exit>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/** Spawns `node bin/sonar.js ...args` with `env` on top of this process's environment. */
export function spawnSonar(
  name: string,
  args: string[],
  env: Record<string, string>,
): SonarProcess {
  return spawnNode(name, [SONAR_BIN, ...args], env);
}

/**
 * Spawns `node ...nodeArgs` the way {@link spawnSonar} does: a test-only entry point such as
 * `['--import', 'tsx', 'test/helpers/faulty-backend-main.ts']`.
 */
export function spawnNode(
  name: string,
  nodeArgs: string[],
  env: Record<string, string>,
): SonarProcess {
  const child = spawn(process.execPath, ['--max-semi-space-size=32', ...nodeArgs], {
    cwd: ROOT,
    env: { ...process.env, SONAR_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${name}`);
  live.add(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }),
  );
  let killed = false;
  let exitedAt: number | null = null;
  void exited.then(() => (exitedAt = Date.now()));
  const proc: SonarProcess = {
    name,
    get exitedAt() {
      return exitedAt;
    },
    get killedOnPurpose() {
      return killed;
    },
    pid: child.pid,
    child,
    exited,
    get running() {
      return child.exitCode === null && child.signalCode === null;
    },
    stderr: () => err,
    stdout: () => out,
    async kill(signal = 'SIGKILL') {
      killed = true;
      if (proc.running) child.kill(signal);
      return exited;
    },
  };
  return proc;
}

/** Kills every process still running (afterAll). */
export async function killAll(): Promise<void> {
  await Promise.all(
    [...live].map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGKILL');
        }),
    ),
  );
}

/** Runs one `sonar` verb to its end: its exit code and everything it wrote. */
export async function runSonar(
  name: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawnSonar(name, args, env);
  const exit = await p.exited;
  return { code: exit.code, stdout: p.stdout(), stderr: p.stderr() };
}
