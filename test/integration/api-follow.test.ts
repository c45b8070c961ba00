/**
 * `ApiClient.follow`, the client side of a long request (`sonar sweep`): progress messages
 * on the reply subject ahead of the answer, and a backend that goes silent given up on.
 */
import { describe, expect, it } from 'vitest';
import { names } from '../../streams/names.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshPrefix } from '../helpers/topology.js';

const nats = serverPerFile();

/** A backend stand-in on `sweep` that sends `messages` to the requester, then nothing. */
function answering(prefix: string, messages: unknown[]) {
  const n = names(prefix);
  nats.nc.subscribe(n.subjects.api('sweep'), {
    max: 1,
    callback: (_err, msg) => {
      for (const m of messages) msg.respond(JSON.stringify(m));
    },
  });
  return n;
}

describe('ApiClient.follow', () => {
  it('hands each progress message over, then resolves with the answer', async () => {
    const n = answering(freshPrefix(), [
      { progress: { repair: 'registry', done: 0, of: 2 } },
      { progress: { repair: 'retention', done: 1, of: 2 } },
      { ok: { swept: true } },
    ]);
    await nats.nc.flush();
    const seen: unknown[] = [];
    const answer = await new ApiClient(nats.nc, n).follow(
      'sweep',
      {},
      {
        onProgress: (p) => seen.push(p.repair),
      },
    );
    expect(answer).toEqual({ swept: true });
    expect(seen).toEqual(['registry', 'retention']);
  });

  it('throws an error answer as the backend gave it', async () => {
    const n = answering(freshPrefix(), [
      { progress: { repair: 'registry', done: 0, of: 2 } },
      { error: { code: 'unavailable', message: 'the backend is stopping', details: {} } },
    ]);
    await nats.nc.flush();
    await expect(new ApiClient(nats.nc, n).follow('sweep', {})).rejects.toMatchObject({
      code: 'unavailable',
      message: 'the backend is stopping',
    });
  });

  it('gives up on a backend that went silent mid-request, with `unavailable`', async () => {
    const n = answering(freshPrefix(), [{ progress: { repair: 'registry', done: 0, of: 2 } }]);
    await nats.nc.flush();
    await expect(
      new ApiClient(nats.nc, n).follow('sweep', {}, { stallMs: 500 }),
    ).rejects.toMatchObject({ code: 'unavailable', message: /said nothing for 500 ms/ });
  });

  it('fails at once when nobody serves the verb', async () => {
    const n = names(freshPrefix());
    await expect(
      new ApiClient(nats.nc, n).follow('sweep', {}, { stallMs: 30_000 }),
    ).rejects.toMatchObject({ code: 'unavailable', message: 'sweep: no backend is serving it' });
  });
});
