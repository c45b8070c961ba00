#!/usr/bin/env node
// `npm run build`: compiles actors/, streams/ and src/ into dist/ (ESM JavaScript, .d.ts and
// source maps with the sources inlined, tsconfig.build.json), prebuilds the dashboard's
// browser script (src/http/dashboard/browser/app.ts -> dist/.../browser/app.js, with esbuild,
// a dev dependency: the server serves the file as it is), then writes dist/.build-stamp.json,
// which scripts/ensure-build.mjs compares with the sources.
//
// Exits 1 on a type error (the files are still emitted, as tsc does); the stamp records it.
// `npm start` and `npm test` build through scripts/ensure-build.mjs instead.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const distDir = join(root, 'dist');
export const stampFile = join(distDir, '.build-stamp.json');

/** What dist/ is made from: a change to any of these (or a file added or removed) rebuilds. */
const SOURCE_DIRS = ['actors', 'streams', 'src'];
const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs'];

/** The options of src/http/dashboard/assets/app-js.ts's fallback (a test compares the two). */
const APP_JS_OPTIONS = { loader: 'ts', format: 'iife', target: 'es2020', sourcefile: 'app.ts' };
const APP_TS = join('src', 'http', 'dashboard', 'browser', 'app.ts');
const APP_JS = join('dist', 'src', 'http', 'dashboard', 'browser', 'app.js');

function walk(dir, out) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (entry.isFile()) out.push(path);
  }
}

/**
 * The build's inputs: their paths (relative, sorted, `/`-separated), a hash of that list, and
 * the newest mtime among them. Stat only, no reads: a few ms for the ~300 files.
 */
export function sources() {
  const files = [];
  for (const dir of SOURCE_DIRS) walk(join(root, dir), files);
  for (const file of SOURCE_FILES) files.push(join(root, file));
  const paths = files.map((f) => relative(root, f).split(sep).join('/')).sort();
  let newest = 0;
  for (const f of files) newest = Math.max(newest, statSync(f).mtimeMs);
  const listHash = createHash('sha256').update(paths.join('\n')).digest('hex');
  return { paths, listHash, newest };
}

/** Builds dist/; returns whether it type-checked clean. */
export async function build() {
  const input = sources();
  const started = Date.now();
  const require = createRequire(import.meta.url);
  const tsc = require.resolve('typescript/bin/tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (result.error) throw result.error;
  const clean = result.status === 0;

  const { transformSync } = await import('esbuild');
  const { code } = transformSync(readFileSync(join(root, APP_TS), 'utf8'), APP_JS_OPTIONS);
  mkdirSync(dirname(join(root, APP_JS)), { recursive: true });
  writeFileSync(join(root, APP_JS), code);

  // Written last, stamped with the inputs as they were when the build began: a source saved
  // during the build is newer than the stamp, so the next check builds again.
  writeFileSync(stampFile, JSON.stringify({ listHash: input.listHash, clean }, null, 2) + '\n');
  const at = new Date(Math.max(input.newest, started - 1));
  utimesSync(stampFile, at, at);
  return clean;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    if (!(await build())) {
      process.stderr.write('sonar: dist/ was built with type errors (tsc, above)\n');
      process.exit(1);
    }
  } catch (err) {
    process.stderr.write(`sonar: build failed: ${err instanceof Error ? err.message : err}\n`);
    process.exit(1);
  }
}
