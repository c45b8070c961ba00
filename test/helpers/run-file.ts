import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunFile } from '../../src/protocol.js';

/** Writes `run` as `<dir>/<runId>.json`, a run file for `sonar submit`; gives its path. */
export async function writeRunFile(dir: string, run: RunFile): Promise<string> {
  const file = join(dir, `${run.runId}.json`);
  await writeFile(file, JSON.stringify(run));
  return file;
}
