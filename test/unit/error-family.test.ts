/**
 * One error family: every error class Sonar defines is a SonarError (a code the wire, the
 * CLI's exit codes and `--json` output understand), but for the few signals listed here, and
 * every error thrown is one of them, but for the few bare throws listed here.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** Error classes that extend Error itself, and why they are not SonarErrors. */
const NOT_SONAR_ERRORS: Record<string, string> = {
  // The family's root.
  SonarError: 'actors/errors.ts',
  // Thrown by users' handlers to fail a task for good (BullMQ's UnrecoverableError): their
  // signal to the worker, which reports it as a `fail`, never an error of Sonar's.
  NonRetryableError: 'src/worker/errors.ts',
  // A task command's exit, carried from the task runner to the worker's `fail` report.
  CommandFailedError: 'src/worker/errors.ts',
  // The CLI's "already printed, exit with this code": never leaves the CLI.
  CommandFailed: 'src/display/output.ts',
};

/**
 * Files that may `throw new Error(`, and why: the throw is caught in the same function, so no
 * bare Error crosses a module boundary.
 */
const BARE_THROWS: Record<string, string> = {
  // A batch reply of the wrong length is handled like any failed batch: each request alone.
  'src/worker/request-batcher.ts': 'caught in the same function',
};

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(join(ROOT, dir), { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.ts')) {
      out.push(relative(ROOT, join(entry.parentPath, entry.name)));
    }
  }
  return out;
}

describe('the error family', () => {
  it('has every error class extend SonarError, but the listed signals', async () => {
    const found: Record<string, string> = {};
    for (const file of [
      ...(await sources('src')),
      ...(await sources('actors')),
      ...(await sources('streams')),
    ]) {
      const text = await readFile(join(ROOT, file), 'utf8');
      for (const m of text.matchAll(/class (\w+) extends Error\b/g)) found[m[1]!] = file;
    }
    expect(found).toEqual(NOT_SONAR_ERRORS);
  });

  it('has no bare `throw new Error(` but in the listed files', async () => {
    const found: Record<string, string> = {};
    for (const file of [
      ...(await sources('src')),
      ...(await sources('actors')),
      ...(await sources('streams')),
    ]) {
      const text = await readFile(join(ROOT, file), 'utf8');
      if (/throw new Error\(/.test(text)) found[file] = BARE_THROWS[file] ?? 'not allowed';
    }
    expect(found).toEqual(BARE_THROWS);
  });
});
