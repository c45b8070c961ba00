#!/usr/bin/env node
// Makes a fresh machine ready for Sonar: the right Node, node_modules, nats-server; with
// --postgres also PostgreSQL (Debian's `postgresql`), which the tests of the PostgreSQL
// results sink start as a throwaway server (test/helpers/postgres.ts).
// Plain Node, no dependencies: it runs before node_modules exists. Quiet when all is there;
// any failure is one `sonar: ...` line on stderr and exit 1.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, statSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MIN_NODE = [20, 19];

class SetupError extends Error {}

function fail(message) {
  throw new SetupError(message);
}

function checkNode() {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  const [wantMajor, wantMinor] = MIN_NODE;
  if (major < wantMajor || (major === wantMajor && minor < wantMinor)) {
    fail(`node ${process.versions.node} is too old: Sonar needs node >= ${wantMajor}.${wantMinor}`);
  }
}

/** Runs a command with inherited stdio; returns its exit code (never throws). */
function run(command, args, env = process.env) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env });
  if (result.error) {
    if (result.error.code === 'ENOENT') fail(`${command} is not on PATH`);
    fail(`${command} ${args.join(' ')} could not start: ${result.error.message}`);
  }
  if (result.signal) return 128;
  return result.status ?? 1;
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

function installDependencies() {
  const lockfile = join(root, 'package-lock.json');
  const installed = join(root, 'node_modules', '.package-lock.json');
  const lockTime = mtime(lockfile);
  const installedTime = mtime(installed);
  const missing = !existsSync(join(root, 'node_modules'));
  const stale = lockTime !== undefined && (installedTime === undefined || lockTime > installedTime);
  if (!missing && !stale) return;
  const args = lockTime === undefined ? ['install'] : ['ci'];
  const status = run('npm', args);
  if (status !== 0) fail(`npm ${args[0]} failed (exit ${status})`);
}

function isExecutable(path) {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && isExecutable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** Where nats-server is, or undefined. NATS_SERVER_BIN, when set, must name it. */
function findNatsServer() {
  const configured = process.env.NATS_SERVER_BIN;
  if (configured !== undefined && configured !== '') {
    if (isExecutable(configured)) return configured;
    fail(
      `NATS_SERVER_BIN=${configured} is not an executable file: point it at nats-server or unset it`,
    );
  }
  return onPath('nats-server');
}

// Test-only hooks (test/unit/setup.test.ts runs this script as a child): SONAR_SETUP_FAKE_UID
// stands in for the real uid, and SONAR_SETUP_OFF_PATH_DIRS (':'-separated) for the usual
// install dirs, so that the "missing" branches can be reached on a machine that has nats-server.
const OFF_PATH_DIRS =
  process.env.SONAR_SETUP_OFF_PATH_DIRS !== undefined
    ? process.env.SONAR_SETUP_OFF_PATH_DIRS.split(':').filter((d) => d !== '')
    : ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin'];

function uid() {
  const fake = process.env.SONAR_SETUP_FAKE_UID;
  if (fake !== undefined && fake !== '') return Number(fake);
  return typeof process.getuid === 'function' ? process.getuid() : undefined;
}

/** Debian installs nats-server in /usr/sbin, which is often not on a non-root user's PATH. */
function offPathNatsServer() {
  return OFF_PATH_DIRS.map((dir) => join(dir, 'nats-server')).find(isExecutable);
}

function ensureNatsServer() {
  if (findNatsServer() !== undefined) return;
  const elsewhere = offPathNatsServer();
  if (elsewhere !== undefined) {
    fail(
      `nats-server is at ${elsewhere} but not on PATH: add ${dirname(elsewhere)} to PATH or set NATS_SERVER_BIN=${elsewhere}`,
    );
  }
  if (uid() !== 0) {
    fail('nats-server is missing: install it with `sudo apt-get install -y nats-server`');
  }
  if (onPath('apt-get') === undefined) {
    fail(
      'nats-server is missing and apt-get is not available: install nats-server (https://docs.nats.io/running-a-nats-service/introduction/installation)',
    );
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  process.stderr.write('sonar: installing nats-server with apt-get\n');
  if (run('apt-get', ['install', '-y', 'nats-server'], env) !== 0) {
    // A fresh machine often has no package lists yet.
    const updated = run('apt-get', ['update'], env);
    if (updated !== 0) fail(`apt-get update failed (exit ${updated}): install nats-server by hand`);
    const installed = run('apt-get', ['install', '-y', 'nats-server'], env);
    if (installed !== 0) fail(`apt-get install -y nats-server failed (exit ${installed})`);
  }
  if (findNatsServer() === undefined) {
    const path = offPathNatsServer();
    fail(
      path === undefined
        ? 'apt-get installed nats-server but it is not on PATH'
        : `nats-server was installed at ${path} but it is not on PATH: set NATS_SERVER_BIN=${path}`,
    );
  }
}

// Test-only hook, like the two above: SONAR_SETUP_PG_ROOT stands in for /usr/lib/postgresql.
const PG_ROOT = process.env.SONAR_SETUP_PG_ROOT || '/usr/lib/postgresql';

/** A `<PG_ROOT>/<version>/bin/postgres` (and initdb), as Debian's packages lay them out. */
function findPostgres() {
  let versions;
  try {
    versions = readdirSync(PG_ROOT);
  } catch {
    return undefined;
  }
  return versions
    .map((v) => join(PG_ROOT, v, 'bin'))
    .find((bin) => isExecutable(join(bin, 'postgres')) && isExecutable(join(bin, 'initdb')));
}

function ensurePostgres() {
  if (findPostgres() !== undefined) return;
  const byHand =
    'install PostgreSQL by hand (`apt-get install -y postgresql`), or run the tests without the PostgreSQL ones';
  if (uid() !== 0) {
    fail('PostgreSQL is missing: install it with `sudo apt-get install -y postgresql`');
  }
  if (onPath('apt-get') === undefined)
    fail(`PostgreSQL is missing and apt-get is not available: ${byHand}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  process.stderr.write('sonar: installing postgresql with apt-get\n');
  // Package lists first: postgresql is not on a fresh machine's, unlike what it already has.
  const updated = run('apt-get', ['update'], env);
  if (updated !== 0) fail(`apt-get update failed (exit ${updated}): ${byHand}`);
  const installed = run('apt-get', ['install', '-y', 'postgresql'], env);
  if (installed !== 0) fail(`apt-get install -y postgresql failed (exit ${installed}): ${byHand}`);
  if (findPostgres() === undefined) {
    fail(
      `apt-get installed postgresql but ${PG_ROOT}/<version>/bin/postgres is not there: ${byHand}`,
    );
  }
}

try {
  checkNode();
  installDependencies();
  ensureNatsServer();
  if (process.argv.includes('--postgres')) ensurePostgres();
} catch (err) {
  const message =
    err instanceof SetupError
      ? err.message
      : `setup failed: ${err instanceof Error ? err.message : String(err)}`;
  process.stderr.write(`sonar: ${message.split('\n')[0]}\n`);
  process.exit(1);
}
