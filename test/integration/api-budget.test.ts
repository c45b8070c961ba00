import { describe, expect, it } from 'vitest';
import { ApiService } from '../../src/backend/api/api-service.js';
import type { Handlers } from '../../src/backend/api/api-service.js';
import { names } from '../../streams/names.js';
import { silentLogger } from '../../src/log.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshPrefix } from '../helpers/topology.js';

const nats = serverPerFile();

interface Reply {
  ok?: unknown;
  error?: { code: string; message: string };
}

/**
 * The API service's bound on the requests it handles at once, on a real server: a worker
 * flooding its own subject is answered `unavailable` past its share, at once, while the
 * other callers are served.
 */
describe('ApiService in-flight budget', () => {
  it('refuses a flooding worker past its share, at once, and keeps serving the others', async () => {
    const n = names(freshPrefix());
    let handled = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    // `leave` of w1 holds until the gate opens: its requests pile up in flight.
    const handlers: Handlers = {
      leave: async (req) => {
        handled++;
        if (req.workerId === 'w1') await gate;
        return { workerId: req.workerId };
      },
    };
    const service = new ApiService(nats.nc, n, handlers, silentLogger, {
      sharedWorkerVerbs: true,
      inflightLimits: { perCallerRequests: 8, perCallerBytes: 1 << 20, totalBytes: 1 << 24 },
    });
    service.start();
    await nats.nc.flush();
    try {
      const ask = async (workerId: string): Promise<Reply> => {
        const m = await nats.nc.request(
          n.subjects.workerApi(workerId, 'leave'),
          JSON.stringify({ workerId }),
          { timeout: 10_000 },
        );
        return m.json<Reply>();
      };
      const flood = Array.from({ length: 40 }, () => ask('w1'));
      await eventually(() => handled === 8, { message: 'w1 holds its share' });
      // Past its share w1 is answered at once, while its first 8 still wait.
      const settled = await Promise.race([
        Promise.all(flood.slice(8)),
        new Promise<'late'>((r) => setTimeout(() => r('late'), 5_000)),
      ]);
      expect(settled).not.toBe('late');
      for (const r of settled as Reply[]) {
        expect(r.error).toMatchObject({
          code: 'unavailable',
          message: 'leave: backend busy: worker w1 has 8 requests in flight here (at most 8)',
        });
      }
      expect(await ask('w2')).toEqual({ ok: { workerId: 'w2' } });
      open();
      const first = await Promise.all(flood.slice(0, 8));
      expect(first).toEqual(Array.from({ length: 8 }, () => ({ ok: { workerId: 'w1' } })));
      // Its share given back, w1 is served again.
      expect(await ask('w1')).toEqual({ ok: { workerId: 'w1' } });
      expect(handled).toBe(8 + 1 + 1);
    } finally {
      open();
      await service.stop();
    }
  });
});
