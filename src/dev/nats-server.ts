/**
 * A nats-server child process: one throwaway server per test file (modelled on nats.js
 * `nst`, STYLE.md C9), and the local server of `sonar dev`.
 *
 * Spawns `nats-server -a 127.0.0.1 -p -1 -js -sd <tmp> --ports_file_dir <tmp>` and reads the
 * ports file the server writes once it listens. Only the pid spawned here is ever signalled.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { access, constants, mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import type { Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { processEnvironment } from '../config.js';
import { ErrorCode, SonarError } from '../../actors/errors.js';

export interface NatsServerOptions {
  /** Extra command-line arguments, appended last (so they win over the defaults). */
  args?: string[];
  /** Client port; default -1 (a random free port chosen by the server). */
  port?: number;
  /** JetStream store dir; default a fresh temp dir, removed by `stop()`. Never removed if given. */
  storeDir?: string;
  /**
   * A config file passed with `-c`. `-a 127.0.0.1 -p <port>` still override it, but `-js -sd`
   * are not passed (2.9 rejects a duplicate store_dir): the config must enable JetStream with
   * `jetstream { store_dir }`, and `storeDir` should name the same dir.
   */
  config?: string;
  /**
   * Start it in a process group of its own. A terminal's Ctrl-C signals its whole foreground
   * group: `sonar dev` needs the server until its workers have drained and reported their ends,
   * so the Ctrl-C must reach `sonar dev` alone, which stops the server last. Tests leave it
   * off, so that a Ctrl-C of a test run takes their servers down with it.
   * @defaultValue false
   */
  ownProcessGroup?: boolean;
}

export interface NatsServer {
  /** `nats://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** Pid of the current process (changes on `restart()`). */
  readonly pid: number;
  readonly storeDir: string;
  /** True while the spawned process has not exited. */
  readonly running: boolean;
  /** The tail of the server's log (stderr), for failure messages. */
  logs(): string;
  /** SIGTERM, await exit (SIGKILL after 5 s), remove the temp dirs. Idempotent. */
  stop(): Promise<void>;
  /** Signal the process (default SIGTERM) and await its exit; keeps every file, for restarts. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Start again on the same port and store dir (stops the running process first). */
  restart(): Promise<void>;
}

export const NATS_SERVER_NOT_FOUND =
  'nats-server not found on PATH: install it with `apt-get install -y nats-server` ' +
  '(or run `npm test`, which installs it when run as root)';

const READY_TIMEOUT_MS = 5_000;
const STOP_GRACE_MS = 5_000;
const LOG_TAIL_BYTES = 64 * 1024;
/** Debian installs the binary in /usr/sbin, which is not on every user's PATH. */
const FALLBACK_DIRS = ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin', '/usr/bin'];

// Children and temp dirs still alive when the test process exits (a crash, a forgotten stop()).
const liveChildren = new Set<ChildProcess>();
const liveTempDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of liveChildren) {
      if (child.exitCode === null && child.signalCode === null) {
        try {
          child.kill('SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    for (const dir of liveTempDirs) {
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // best effort: the killed server may still be closing files
      }
    }
  });
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `NATS_SERVER_BIN` if set, else `nats-server` on PATH, else the usual install dirs. */
export async function resolveNatsServerBinary(): Promise<string> {
  const override = processEnvironment.natsServerBin();
  if (override !== undefined && override !== '') {
    if (override.includes('/')) {
      const path = isAbsolute(override) ? override : resolve(override);
      if (await isExecutable(path)) return path;
      throw new SonarError(
        ErrorCode.Unavailable,
        `${NATS_SERVER_NOT_FOUND}; NATS_SERVER_BIN='${override}' is not executable`,
      );
    }
    for (const dir of processEnvironment.searchPath()) {
      if (dir !== '' && (await isExecutable(join(dir, override)))) return join(dir, override);
    }
    throw new SonarError(
      ErrorCode.Unavailable,
      `${NATS_SERVER_NOT_FOUND}; NATS_SERVER_BIN='${override}' is not on PATH`,
    );
  }
  const dirs = [...processEnvironment.searchPath(), ...FALLBACK_DIRS];
  for (const dir of dirs) {
    if (dir !== '' && (await isExecutable(join(dir, 'nats-server')))) {
      return join(dir, 'nats-server');
    }
  }
  throw new SonarError(ErrorCode.Unavailable, NATS_SERVER_NOT_FOUND);
}

type Exit = { code: number | null; signal: NodeJS.Signals | null; error?: Error };

class Proc {
  readonly exited: Promise<Exit>;
  private logTail = '';

  constructor(readonly child: ChildProcess) {
    this.exited = new Promise<Exit>((resolveExit) => {
      child.once('exit', (code, signal) => resolveExit({ code, signal }));
      child.once('error', (error) => {
        // spawn failure (ENOENT, EACCES): no 'exit' follows
        if (child.pid === undefined) resolveExit({ code: null, signal: null, error });
      });
    });
    void this.exited.then(() => liveChildren.delete(child));
    const stderr = child.stderr;
    stderr?.setEncoding('utf8');
    stderr?.on('data', (chunk: string) => {
      this.logTail = (this.logTail + chunk).slice(-LOG_TAIL_BYTES);
    });
    // A forgotten server must not keep the test process alive; the exit hook kills it.
    child.unref();
    (stderr as Socket | null)?.unref(); // a pipe is a net.Socket
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  logs(): string {
    return this.logTail;
  }

  async kill(signal: NodeJS.Signals): Promise<void> {
    if (!this.running) {
      await this.exited;
      return;
    }
    this.child.kill(signal);
    if (signal === 'SIGKILL') {
      await this.exited;
      return;
    }
    const timer = delay(STOP_GRACE_MS, 'timeout' as const);
    const first = await Promise.race([this.exited, timer]);
    if (first === 'timeout' && this.running) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

function describeExit(exit: Exit): string {
  if (exit.error) return exit.error.message;
  return exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

async function readPortsFile(dir: string, pid: number): Promise<number | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return undefined;
  }
  // the file is `<executable name>_<pid>.ports`; the name depends on NATS_SERVER_BIN
  const name = names.find((n) => n.endsWith(`_${pid}.ports`));
  if (name === undefined) return undefined;
  try {
    const ports = JSON.parse(await readFile(join(dir, name), 'utf8')) as { nats?: unknown };
    const first = Array.isArray(ports.nats) ? (ports.nats[0] as unknown) : undefined;
    if (typeof first !== 'string') return undefined;
    const port = Number(new URL(first).port);
    return Number.isInteger(port) && port > 0 ? port : undefined;
  } catch {
    return undefined; // partially written: try again
  }
}

class NatsServerHandle implements NatsServer {
  private proc: Proc | undefined;
  private currentPort = -1;
  private stopped = false;

  constructor(
    private readonly bin: string,
    private readonly tempDir: string,
    readonly storeDir: string,
    private readonly opts: NatsServerOptions,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.currentPort}`;
  }

  get port(): number {
    return this.currentPort;
  }

  get pid(): number {
    return this.proc?.child.pid ?? -1;
  }

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  logs(): string {
    return this.proc?.logs() ?? '';
  }

  async start(port: number): Promise<void> {
    await mkdir(this.tempDir, { recursive: true });
    await mkdir(this.storeDir, { recursive: true });
    liveTempDirs.add(this.tempDir);
    // nats-server 2.9 refuses `-sd` next to a config that sets `store_dir` ("Duplicate
    // 'store_dir' configuration"), so a config file brings its own `jetstream {}` block.
    const args = [
      ...(this.opts.config !== undefined
        ? ['-c', this.opts.config]
        : ['-js', '-sd', this.storeDir]),
      ...['-a', '127.0.0.1', '-p', String(port), '--ports_file_dir', this.tempDir],
      ...(this.opts.args ?? []),
    ];
    installExitHook();
    const child = spawn(this.bin, args, {
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: this.opts.ownProcessGroup === true,
    });
    if (child.pid !== undefined) liveChildren.add(child);
    const proc = new Proc(child);
    this.proc = proc;
    this.stopped = false;

    const fail = async (why: string): Promise<never> => {
      await proc.kill('SIGKILL');
      const log = proc.logs().trim();
      throw new SonarError(
        ErrorCode.Unavailable,
        `nats-server ${args.join(' ')}: ${why}` + (log ? `\n--- stderr ---\n${log}` : ''),
      );
    };

    if (child.pid === undefined) {
      const exit = await proc.exited;
      if (exit.error && (exit.error as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new SonarError(
          ErrorCode.Unavailable,
          NATS_SERVER_NOT_FOUND,
          {},
          { cause: exit.error },
        );
      }
      return fail(describeExit(exit));
    }
    const pid = child.pid;
    const deadline = performance.now() + READY_TIMEOUT_MS;
    let exit: Exit | undefined;
    void proc.exited.then((e) => (exit = e));
    while (performance.now() < deadline) {
      if (exit) return fail(`${describeExit(exit)} before it was ready`);
      const found = await readPortsFile(this.tempDir, pid);
      if (found !== undefined) {
        this.currentPort = found;
        return;
      }
      await Promise.race([delay(25), proc.exited]);
    }
    return fail(`no ports file in ${this.tempDir} after ${READY_TIMEOUT_MS} ms`);
  }

  async kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.proc?.kill(signal);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.kill('SIGTERM');
    await rm(this.tempDir, { recursive: true, force: true, maxRetries: 3 });
    liveTempDirs.delete(this.tempDir);
  }

  async restart(): Promise<void> {
    if (this.proc === undefined)
      throw new SonarError(ErrorCode.Unavailable, 'nats-server was never started');
    await this.kill('SIGTERM');
    await this.start(this.currentPort);
  }
}

export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServer> {
  const bin = await resolveNatsServerBinary();
  const tempDir = await mkdtemp(join(tmpdir(), 'sonar-nats-'));
  const storeDir = opts.storeDir ?? tempDir;
  const server = new NatsServerHandle(bin, tempDir, storeDir, opts);
  try {
    await server.start(opts.port ?? -1);
  } catch (err: unknown) {
    await rm(tempDir, { recursive: true, force: true, maxRetries: 3 });
    liveTempDirs.delete(tempDir);
    throw err;
  }
  return server;
}
