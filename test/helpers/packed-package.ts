/**
 * The package as a user gets it, for the tests that install it (package-install, examples):
 * one `npm pack` tarball, shared by every test file and every run while what it packs is
 * unchanged, and `npm install` of it into a fresh project, offline when the npm cache holds
 * the dependencies (it does since `npm ci` filled node_modules: `--prefer-offline`).
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { promisify } from 'node:util';
import { eventually } from './eventually.js';
import { startNatsServer } from './nats-server.js';
import type { NatsServer } from './nats-server.js';
import { ROOT } from './worker-fixtures.js';

export { ROOT };

const run = promisify(execFile);

interface PackageJson {
  name: string;
  version: string;
  bin: Record<string, string>;
  files: string[];
}
export const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;

/** The version of a package this checkout installed (`npm ci`), so it is in the npm cache. */
export function installedVersion(name: string): string {
  const manifest = join(ROOT, 'node_modules', ...name.split('/'), 'package.json');
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/** This checkout's TypeScript compiler, for projects that do not install their own. */
export const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** The environment of every child: no loader or npm setting of this process leaks into it. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'NODE_OPTIONS' || k.startsWith('npm_') || k.startsWith('VITEST')) continue;
    if (k.startsWith('SONAR_')) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

/**
 * A digest of everything `npm pack` puts in the tarball: package.json and the files its
 * `files` list names (without the `!` exclusions). Equal digests pack equal tarballs.
 */
function packedDigest(): string {
  const include = pkg.files.filter((f) => !f.startsWith('!')).map((f) => f.replace(/\/$/, ''));
  const exclude = new Set(pkg.files.filter((f) => f.startsWith('!')).map((f) => f.slice(1)));
  const hash = createHash('sha256');
  const add = (path: string): void => {
    const rel = relative(ROOT, path).split(sep).join('/');
    if (exclude.has(rel)) return;
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path).sort()) add(join(path, entry));
      return;
    }
    hash.update(`${rel}\0`).update(readFileSync(path)).update('\0');
  };
  for (const f of ['package.json', ...include]) add(join(ROOT, f));
  return hash.digest('hex').slice(0, 16);
}

/** Where tarballs are kept between test files and runs; older ones are removed. */
const CACHE = join(tmpdir(), 'sonar-packed');
const KEEP_MS = 24 * 3600_000;

/**
 * The packed tarball of this checkout: made once for what it packs (dist/ as vitest's
 * globalSetup built it, bin/, docs/, README, LICENSE, package.json) and reused by every test
 * file that installs the package, in this run and the next, until one of them changes.
 */
export async function packedTarball(): Promise<string> {
  const target = join(
    CACHE,
    `${pkg.name.replace('@', '').replace('/', '-')}-${pkg.version}-${packedDigest()}.tgz`,
  );
  if (
    await stat(target).then(
      () => true,
      () => false,
    )
  )
    return target;
  await mkdir(CACHE, { recursive: true });
  await pruneOld(target);
  // Packed in a directory of its own and renamed into place: two test files packing at once
  // each rename a whole tarball, never a half-written one.
  const scratch = await mkdtemp(join(CACHE, 'pack-'));
  try {
    // No prepack: dist/ is already fresh (globalSetup), and a build here would rewrite it
    // under the other test files' processes.
    const packed = await run(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch],
      {
        cwd: ROOT,
        env: cleanEnv(),
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
    await rename(join(scratch, filename), target);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return target;
}

async function pruneOld(keep: string): Promise<void> {
  const now = Date.now();
  for (const entry of await readdir(CACHE)) {
    const path = join(CACHE, entry);
    if (path === keep) continue;
    const info = await stat(path).catch(() => null);
    if (info && now - info.mtimeMs > KEEP_MS) await rm(path, { recursive: true, force: true });
  }
}

/** `npm install` in `project` (its package.json, plus `specs`), from the cache when it can. */
export async function npmInstall(project: string, specs: string[] = []): Promise<void> {
  await run(
    'npm',
    ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...specs],
    { cwd: project, env: cleanEnv(), maxBuffer: 16 * 1024 * 1024 },
  );
}

/**
 * What a test of the installed package runs against: a nats-server of its own and the
 * installed `sonar backend`, with fast test timings; every child it was given is SIGKILLed
 * by `stop()` if still running.
 */
export interface InstalledWorld {
  nats: NatsServer;
  backend: ChildProcess;
  env: NodeJS.ProcessEnv;
  /** The backend's stderr so far (its JSON log). */
  backendLog(): string;
  /** Registers a child to kill at `stop()`. */
  own(child: ChildProcess): ChildProcess;
  stop(): Promise<void>;
}

/** Starts a nats-server and `bin backend` in `cwd`, with prefix `prefix`. */
export async function startInstalledWorld(
  bin: string,
  cwd: string,
  prefix: string,
): Promise<InstalledWorld> {
  const children = new Set<ChildProcess>();
  const nats = await startNatsServer();
  const env = cleanEnv({
    SONAR_NATS_URL: nats.url,
    SONAR_PREFIX: prefix,
    SONAR_TICK: '200ms',
    SONAR_PULSE_INTERVAL: '300ms',
    SONAR_PULSE_TTL: '3s',
    SONAR_DRAIN_GRACE: '2s',
    SONAR_IMDS_URL: 'http://127.0.0.1:9',
    SONAR_LOG_LEVEL: 'info',
  });
  const backend = spawn(bin, ['backend'], { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(backend);
  let log = '';
  backend.stderr.on('data', (c: Buffer) => (log += c.toString()));
  const world: InstalledWorld = {
    nats,
    backend,
    env,
    backendLog: () => log,
    own: (child) => {
      children.add(child);
      return child;
    },
    stop: async () => {
      for (const child of children) {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      await nats.stop();
    },
  };
  try {
    await eventually(() => log.includes('"backend started"'), {
      timeoutMs: 30_000,
      message: 'backend started',
    });
  } catch (err: unknown) {
    await world.stop();
    throw err;
  }
  return world;
}
