import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../actors/errors.js';
import { ApiError } from '../../src/worker/api-client.js';
import type { ApiClient, CallOptions } from '../../src/worker/api-client.js';
import { RequestBatcher } from '../../src/worker/request-batcher.js';

const attempt = (taskId: string) => ({
  runId: 'r1',
  taskId,
  attemptId: 'a1',
  token: 'tok',
  workerId: 'w1',
});

/** An ApiClient that records each request and answers with `answer`. */
function fakeApi(answer: (verb: string, body: unknown) => unknown) {
  const sent: { verb: string; body: unknown; opts: CallOptions | undefined }[] = [];
  const api = {
    request: async (verb: string, body: unknown, opts?: CallOptions) => {
      sent.push({ verb, body, opts });
      await Promise.resolve();
      return answer(verb, body);
    },
  } as unknown as ApiClient;
  return { api, sent };
}

describe('RequestBatcher', () => {
  it('sends the requests of one turn as one batch, and settles each with its own answer', async () => {
    const { api, sent } = fakeApi((verb, body) => {
      if (verb !== 'batch') throw new Error('a lone request');
      const { requests } = body as { requests: { body: { taskId: string } }[] };
      return {
        replies: requests.map((r) =>
          r.body.taskId === 't2'
            ? { error: { code: 'stale_attempt', message: 't2 moved on', details: {} } }
            : { ok: {} },
        ),
      };
    });
    const b = new RequestBatcher(api, 'w1');
    const [one, two, three] = await Promise.allSettled([
      b.request('start', attempt('t1')),
      b.request('start', attempt('t2')),
      b.request('result', { ...attempt('t3'), output: { inline: 'aGk=', bytes: 2 } }),
    ]);
    expect(sent.map((s) => s.verb)).toEqual(['batch']);
    expect(one.status).toBe('fulfilled');
    expect(three.status).toBe('fulfilled');
    expect(two.status === 'rejected' && (two.reason as ApiError).code).toBe('stale_attempt');
    expect(two.status === 'rejected' && (two.reason as ApiError).verb).toBe('start');
  });

  it("names each traced request's traceparent by its index; a lone one carries its own", async () => {
    const tp = (n: number) => `00-0af7651916cd43dd8448eb211c80319c-00000000000000${n}1-01`;
    const { api, sent } = fakeApi((verb, body) =>
      verb === 'batch'
        ? { replies: (body as { requests: unknown[] }).requests.map(() => ({ ok: {} })) }
        : {},
    );
    const b = new RequestBatcher(api, 'w1');
    await Promise.all([
      b.request('start', attempt('t0'), { traceparent: tp(0) }),
      b.request('start', attempt('t1')),
      b.request('start', attempt('t2'), { traceparent: tp(2) }),
    ]);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.opts?.headers).toEqual({
      'Sonar-Traceparent-0': tp(0),
      'Sonar-Traceparent-2': tp(2),
    });
    await b.request('start', attempt('t3'), { traceparent: tp(3) });
    expect(sent[1]).toMatchObject({ verb: 'start', opts: { traceparent: tp(3) } });
  });

  it('sends a request alone when it is alone', async () => {
    const { api, sent } = fakeApi(() => ({}));
    await new RequestBatcher(api, 'w1').request('start', attempt('t1'));
    expect(sent.map((s) => s.verb)).toEqual(['start']);
  });

  it('falls back to lone requests for good when the backend does not know batch', async () => {
    const { api, sent } = fakeApi((verb) => {
      if (verb === 'batch') throw new ApiError('batch', ErrorCode.NotFound, 'unknown api verb');
      return {};
    });
    const b = new RequestBatcher(api, 'w1');
    await Promise.all([b.request('start', attempt('t1')), b.request('start', attempt('t2'))]);
    await Promise.all([b.request('start', attempt('t3')), b.request('start', attempt('t4'))]);
    expect(sent.map((s) => s.verb)).toEqual(['batch', 'start', 'start', 'start', 'start']);
  });

  it('sends a request answered unavailable in a batch again alone', async () => {
    const { api, sent } = fakeApi((verb) => {
      if (verb !== 'batch') return { again: true };
      return {
        replies: [{ ok: {} }, { error: { code: 'unavailable', message: 'busy', details: {} } }],
      };
    });
    const b = new RequestBatcher(api, 'w1');
    const [, second] = await Promise.all([
      b.request('start', attempt('t1')),
      b.request('start', attempt('t2')),
    ]);
    expect(second).toEqual({ again: true });
    expect(sent.map((s) => s.verb)).toEqual(['batch', 'start']);
  });
});
