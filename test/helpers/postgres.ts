/**
 * A throwaway PostgreSQL server for a test file: Debian's binaries (`postgresql`, installed
 * by `npm run setup`), a fresh data dir, a free loopback port, password authentication over
 * TCP. PostgreSQL refuses to run as root, so as root it runs as the `postgres` user that the
 * package creates. It takes no port 0: a random port is tried, and another on a clash.
 * Only the pid spawned here is ever signalled.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chownSync, existsSync, readdirSync, rmSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { perFile } from './per-file.js';

export const PG_NOT_INSTALLED =
  'PostgreSQL is not installed (no /usr/lib/postgresql/<version>/bin/postgres): run `npm run setup` as root, or `apt-get install -y postgresql`';

/** The database user and password the tests connect with. */
export const PG_USER = 'sonar';
export const PG_PASSWORD = 'pg-secret-7Hq2';

export interface Postgres {
  /** `postgres://sonar:<password>@127.0.0.1:<port>/postgres` */
  readonly url: string;
  readonly port: number;
  readonly running: boolean;
  /** The tail of the server's log. */
  logs(): string;
  /** One query on a connection of its own (the test's look at the table). */
  query<R extends object = Record<string, unknown>>(sql: string, values?: unknown[]): Promise<R[]>;
  /** Fast shutdown (SIGINT: sessions are ended at once), or `signal`; files are kept. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts again on the same port and data dir. */
  restart(): Promise<void>;
  /** Stops it and removes its files. Idempotent. */
  stop(): Promise<void>;
}

/** The newest installed major version's bin dir, or null. */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? null : join(root, versions[0], 'bin');
}

/** The uid and gid to run as: the `postgres` user when we are root, else ourselves. */
function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  const uid = id('-u');
  const gid = id('-g');
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error(
      "running as root, and there is no `postgres` user to run PostgreSQL as (Debian's postgresql package creates it)",
    );
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

const LOG_TAIL = 32 * 1024;
const liveChildren = new Set<ChildProcess>();
let exitHook = false;

function killOnExit(child: ChildProcess): void {
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  if (exitHook) return;
  exitHook = true;
  process.once('exit', () => {
    for (const c of liveChildren) {
      try {
        c.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

const randomPort = (): number => 20_000 + Math.floor(Math.random() * 30_000);

export interface PostgresOptions {
  /**
   * Server settings (`-c name=value`) on top of the test ones, which turn durability off
   * (`fsync`, `synchronous_commit`, `full_page_writes`): a bench sets them back on.
   */
  settings?: Record<string, string>;
}

const TEST_SETTINGS: Record<string, string> = {
  listen_addresses: '127.0.0.1',
  // A test server: durability is not what is tested, speed on a shared machine is.
  fsync: 'off',
  synchronous_commit: 'off',
  full_page_writes: 'off',
  max_connections: '200',
};

/** Starts a fresh server (initdb, then postgres on a free port); throws one clear line when none is installed. */
export async function startPostgres(opts: PostgresOptions = {}): Promise<Postgres> {
  const settings = { ...TEST_SETTINGS, ...opts.settings };
  const bin = postgresBinDir();
  if (bin === null) throw new Error(PG_NOT_INSTALLED);
  const user = runAs();
  const dir = await mkdtemp(join(tmpdir(), 'sonar-pg-'));
  const own = (path: string) => {
    if (user) chownSync(path, user.uid, user.gid);
  };
  own(dir);
  const data = join(dir, 'data');
  const pwfile = join(dir, 'pw');
  await writeFile(pwfile, `${PG_PASSWORD}\n`);
  await chmod(pwfile, 0o600);
  own(pwfile);
  const spawnOpts = { ...(user ?? {}), cwd: dir };
  const init = spawnSync(
    join(bin, 'initdb'),
    [
      '-D',
      data,
      '-U',
      PG_USER,
      `--pwfile=${pwfile}`,
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
      '-E',
      'UTF8',
      '--no-sync',
    ],
    { ...spawnOpts, encoding: 'utf8' },
  );
  if (init.status !== 0) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (exit ${init.status}): ${init.stderr || init.stdout}`);
  }
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let tail = '';
  let port = 0;

  const launch = async (wanted: number): Promise<'up' | 'port-in-use'> => {
    tail = '';
    const c = spawn(
      join(bin, 'postgres'),
      [
        '-D',
        data,
        '-p',
        String(wanted),
        '-c',
        `unix_socket_directories=${dir}`,
        ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      ],
      { ...spawnOpts, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    child = c;
    killOnExit(c);
    exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    c.stderr?.setEncoding('utf8');
    c.stderr?.on('data', (chunk: string) => {
      tail = (tail + chunk).slice(-LOG_TAIL);
    });
    c.unref();
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (c.exitCode !== null || c.signalCode !== null) {
        return /could not bind|Address already in use|could not create any TCP/i.test(tail)
          ? 'port-in-use'
          : Promise.reject(new Error(`postgres exited at start:\n${tail}`));
      }
      if (/ready to accept connections/.test(tail)) return 'up';
      await delay(50);
    }
    c.kill('SIGKILL');
    throw new Error(`postgres did not start within 30 s:\n${tail}`);
  };

  const kill = async (signal: NodeJS.Signals = 'SIGINT'): Promise<void> => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    c.kill(signal);
    const timer = delay(10_000, 'timeout' as const);
    if ((await Promise.race([exited, timer])) === 'timeout') {
      c.kill('SIGKILL');
      await exited;
    }
  };

  const start = async (fixedPort?: number): Promise<void> => {
    for (let tries = 0; tries < 10; tries++) {
      const wanted = fixedPort ?? randomPort();
      if ((await launch(wanted)) === 'up') {
        port = wanted;
        return;
      }
      if (fixedPort !== undefined) await delay(500);
    }
    throw new Error(`postgres found no free port in 10 tries:\n${tail}`);
  };

  try {
    await start();
  } catch (err: unknown) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let stopped = false;
  const url = () => `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${port}/postgres`;
  return {
    get url() {
      return url();
    },
    get port() {
      return port;
    },
    get running() {
      const c = child;
      return c !== null && c.exitCode === null && c.signalCode === null;
    },
    logs: () => tail,
    async query<R extends object>(sql: string, values: unknown[] = []): Promise<R[]> {
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        return (await client.query<R>(sql, values)).rows;
      } finally {
        await client.end();
      }
    },
    kill,
    restart: async () => {
      await kill();
      await start(port);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await kill();
      await rm(dir, { recursive: true, force: true, maxRetries: 3 });
    },
  };
}

/** One PostgreSQL server for the calling test file: started before its first test, stopped after its last. */
export const postgresPerFile = (opts: PostgresOptions = {}): (() => Postgres) =>
  perFile(
    'postgresPerFile',
    () => startPostgres(opts),
    (p) => p.stop(),
  );
