import { afterAll, beforeAll } from 'vitest';

/**
 * Something the calling test file starts before its first test and stops after its last
 * (a server, a cluster, a temp directory): call at the top level, and call the result inside
 * tests only. `start` cleans up after itself when it fails part way. `timeoutMs` bounds the
 * start and the stop each (the project's hook timeout otherwise).
 */
export function perFile<T>(
  name: string,
  start: () => Promise<T>,
  stop: (value: T) => Promise<void>,
  opts: { timeoutMs?: number } = {},
): () => T {
  let value: T | undefined;
  beforeAll(async () => {
    value = await start();
  }, opts.timeoutMs);
  afterAll(async () => {
    if (value !== undefined) await stop(value);
  }, opts.timeoutMs);
  return () => {
    if (value === undefined) throw new Error(`${name}: read inside a test, not at load`);
    return value;
  };
}
