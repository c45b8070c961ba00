import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { perFile } from './per-file.js';

/**
 * A temp directory (`<tmp>/<name>-XXXXXX`) for the calling test file: made before its first
 * test, removed after its last. Call at the top level; call the result inside tests only.
 */
export const tempDirPerFile = (name: string): (() => string) =>
  perFile(
    'tempDirPerFile',
    () => mkdtemp(join(tmpdir(), `${name}-`)),
    (dir) => rm(dir, { recursive: true, force: true }),
  );
