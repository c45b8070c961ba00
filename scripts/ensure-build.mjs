#!/usr/bin/env node
// Builds dist/ when it is missing or older than its sources (scripts/build.mjs says which
// files those are); quiet and fast (stat only, a few ms) when it is up to date. `npm start`,
// `npm test` and `npm pack` run it, and so does vitest before any test (its globalSetup): the
// tests import the TypeScript sources, but the processes they spawn run bin/sonar.js, which
// loads dist/. A source file added, removed or renamed empties dist/ first, so no stale module
// survives. One build at a time per checkout (a lock in node_modules/.cache); a second caller
// waits for it and then finds dist/ fresh.
//
//   node scripts/ensure-build.mjs           a type error is a warning (`npm run typecheck`
//                                           reports it; the suite still runs)
//   node scripts/ensure-build.mjs --strict  exit 1 unless dist/ type-checked clean (prepack)
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { build, distDir, root, sources, stampFile } from './build.mjs';

const lockDir = join(root, 'node_modules', '.cache', 'sonar-build.lock');
const LOCK_WAIT_MS = 180_000;
/** Outputs that must exist for dist/ to count as built, whatever the stamp says. */
const OUTPUTS = ['src/cli/main.js', 'src/index.js', 'src/index.d.ts'].map((f) => join(distDir, f));

function readStamp() {
  try {
    return { ...JSON.parse(readFileSync(stampFile, 'utf8')), mtimeMs: statSync(stampFile).mtimeMs };
  } catch {
    return undefined;
  }
}

/** Why dist/ needs a build, or undefined when it is up to date. */
function staleness(strict) {
  const stamp = readStamp();
  if (stamp === undefined || !OUTPUTS.every((f) => existsSync(f))) return 'dist/ is missing';
  const input = sources();
  if (stamp.listHash !== input.listHash) return 'source files were added or removed';
  if (input.newest > stamp.mtimeMs) return 'sources changed';
  if (strict && stamp.clean !== true) return 'the last build had type errors';
  return undefined;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

async function lock() {
  const deadline = Date.now() + LOCK_WAIT_MS;
  mkdirSync(join(lockDir, '..'), { recursive: true });
  for (;;) {
    try {
      mkdirSync(lockDir);
      writeFileSync(join(lockDir, 'pid'), String(process.pid));
      return () => rmSync(lockDir, { recursive: true, force: true });
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    let holder;
    try {
      holder = Number(readFileSync(join(lockDir, 'pid'), 'utf8'));
    } catch {
      holder = undefined; // just made, its pid not yet written
    }
    // A builder that died (SIGKILL, a crash) leaves its lock behind.
    if (holder !== undefined && holder > 0 && !alive(holder)) {
      rmSync(lockDir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(`another build (pid ${holder}) still holds ${lockDir}`);
    }
    await delay(200);
  }
}

/** Resolves true when dist/ is up to date (and, with `strict`, type-checked clean). */
export async function ensureBuild({ strict = false } = {}) {
  if (staleness(strict) === undefined) return true;
  const release = await lock();
  try {
    const why = staleness(strict); // another process may have built it while this one waited
    if (why === undefined) return true;
    if (why !== 'sources changed' && why !== 'the last build had type errors') {
      rmSync(distDir, { recursive: true, force: true });
    }
    process.stderr.write(`sonar: building dist/ (${why})\n`);
    const clean = await build();
    if (!clean) {
      process.stderr.write(
        'sonar: dist/ was built with type errors (tsc, above; `npm run typecheck`)\n',
      );
    }
    return clean || !strict;
  } finally {
    release();
  }
}

/** vitest's globalSetup (vitest.config.ts): spawned `bin/sonar.js` processes run dist/. */
export async function setup() {
  await ensureBuild();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    if (!(await ensureBuild({ strict: process.argv.includes('--strict') }))) process.exit(1);
  } catch (err) {
    process.stderr.write(`sonar: build failed: ${err instanceof Error ? err.message : err}\n`);
    process.exit(1);
  }
}
