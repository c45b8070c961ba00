/**
 * A backend per test, on the file's one server (serverPerFile), with the worker fixtures'
 * parts (startTestBackend). After each test, in this order: the in-process workers it
 * handed over drain, every worker process is killed, and the backend stops.
 */
import { afterEach } from 'vitest';
import type { Worker } from '../../src/worker/worker.js';
import type { ServerPerFile } from './server-per-file.js';
import type { TestBackend } from './test-backend.js';
import { everyTaskHasResult, killWorkers, startTestBackend } from './worker-fixtures.js';

export interface BackendPerTest {
  /** Starts the running test's backend: `env` on top of the test settings. */
  start(env?: Record<string, string>, opts?: { reconciler?: boolean }): Promise<TestBackend>;
  /** Hands `w` over to be drained after the test, before the backend stops. */
  drainAfter(w: Worker): Worker;
  /** Waits until every task of the running test's backend has a result (everyTaskHasResult). */
  everyTaskHasResult(timeoutMs: number): Promise<true>;
}

export function backendPerTest(nats: ServerPerFile): BackendPerTest {
  let tb: TestBackend | undefined;
  const workers: Worker[] = [];
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      if (w.state === 'Running' || w.state === 'Draining') await w.drain().catch(() => {});
    }
    await killWorkers();
    await tb?.stop();
    tb = undefined;
  });
  return {
    async start(env = {}, opts = {}) {
      tb = await startTestBackend(nats.server.url, nats.nc, env, opts);
      return tb;
    },
    drainAfter(w) {
      workers.push(w);
      return w;
    },
    everyTaskHasResult(timeoutMs) {
      if (!tb) throw new Error('backendPerTest: no backend started in this test');
      return everyTaskHasResult(tb.ctx, timeoutMs);
    },
  };
}
