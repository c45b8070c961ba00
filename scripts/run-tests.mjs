#!/usr/bin/env node
// Runs vitest projects (the fast tier unless told), then prints one plain summary line as
// the very last output: `N passed, N failed`. A test file that fails to load (or whose
// hooks fail) counts as one failed test, and so does a vitest run that fails with no failed
// test (unhandled errors, no test files), so the line never says `0 failed` for a failing
// run.
// Extra arguments are passed to vitest: `node scripts/run-tests.mjs --project unit`. With no
// `--project`, the fast tier runs: every project but `chaos` and `long`, the fault scenarios
// that `npm run test:long` runs one file at a time.
// With --checks, typecheck and lint run first and count as one test each, so the summary
// line ends the output even when they fail (CI reads it), and the suite still runs.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const resultsFile = join(root, '.vitest-results.json');

function firstLine(text) {
  return String(text ?? 'no message')
    .split('\n')[0]
    .slice(0, 300);
}

function summarize(passed, failed) {
  passed += checksPassed;
  failed += checksFailed;
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  process.exit(failed > 0 ? 1 : 0);
}

const args = process.argv.slice(2);
let checksPassed = 0;
let checksFailed = 0;
if (args[0] === '--checks') {
  args.shift();
  for (const [name, script] of [
    ['typecheck', 'typecheck'],
    ['lint', 'lint'],
  ]) {
    const r = spawnSync('npm', ['run', '--silent', script], { cwd: root, stdio: 'inherit' });
    if (r.status === 0) checksPassed++;
    else {
      checksFailed++;
      process.stderr.write(`sonar: ${name} failed\n`);
    }
  }
}

const projectChosen = args.some((a) => a === '--project' || a.startsWith('--project='));
const FAST_TIER = ['unit', 'replay', 'sim', 'integration'];
if (!projectChosen) args.push(...FAST_TIER.flatMap((name) => ['--project', name]));

// A stale report from an earlier run must not stand in for this one.
rmSync(resultsFile, { force: true });

const vitest = spawnSync(
  'npx',
  [
    'vitest',
    'run',
    '--reporter=default',
    '--reporter=json',
    '--outputFile=.vitest-results.json',
    ...args,
  ],
  { cwd: root, stdio: 'inherit' },
);
if (vitest.error) process.stderr.write(`sonar: could not run vitest: ${vitest.error.message}\n`);
const vitestFailed = vitest.error !== undefined || vitest.status !== 0;

let report;
try {
  report = JSON.parse(readFileSync(resultsFile, 'utf8'));
} catch {
  process.stderr.write('sonar: vitest wrote no results to .vitest-results.json\n');
  summarize(0, 1);
}

const count = (value) => (Number.isInteger(value) && value > 0 ? value : 0);
const passed = count(report.numPassedTests);
let failed = count(report.numFailedTests);
// What failed is listed again right above the summary line: CI logs are often read from
// their tail, and vitest's own account of a failure is far above it.
const failures = [];
for (const file of Array.isArray(report.testResults) ? report.testResults : []) {
  const name = relative(root, String(file.name ?? '?'));
  const failedTests = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
  for (const t of failedTests) {
    failures.push(`${name} > ${t.fullName ?? t.title}: ${firstLine(t.failureMessages?.[0])}`);
  }
  // The file failed on its own: an import error, a crash, a failing beforeAll/afterAll.
  if (file.status === 'failed' && failedTests.length === 0) {
    failed += 1;
    failures.push(`${name}: ${firstLine(file.message)}`);
  }
}
for (const line of failures) process.stdout.write(`FAILED ${line}\n`);
if (vitestFailed && failed === 0) failed = 1;
summarize(passed, failed);
