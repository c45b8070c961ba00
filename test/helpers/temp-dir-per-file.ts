import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

/**
 * A temp directory (`<tmp>/<name>-XXXXXX`) for the calling test file: made before its first
 * test, removed after its last. Call at the top level; call the result inside tests only.
 */
export function tempDirPerFile(name: string): () => string {
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), `${name}-`));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return () => {
    if (dir === undefined) throw new Error('tempDirPerFile: read inside a test, not at load');
    return dir;
  };
}
