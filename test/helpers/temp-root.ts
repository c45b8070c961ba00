import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What `start` starts in a fresh temp root (`<tmp>/<name>-XXXXXX`: a server's config, store
 * and certificates, say), whose `stop()` then also removes the root and every file in it; the
 * root goes at once when `start` fails.
 */
export async function inTempRoot<T extends { stop(): Promise<void> }>(
  name: string,
  start: (root: string) => Promise<T>,
): Promise<T> {
  const root = await mkdtemp(join(tmpdir(), `${name}-`));
  const removeRoot = () => rm(root, { recursive: true, force: true, maxRetries: 3 });
  try {
    const started = await start(root);
    return {
      ...started,
      async stop() {
        await started.stop();
        await removeRoot();
      },
    };
  } catch (err: unknown) {
    await removeRoot();
    throw err;
  }
}
