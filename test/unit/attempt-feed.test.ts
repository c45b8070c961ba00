import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LOG_CHUNK_BYTES } from '../../streams/topology.js';
import { AttemptFeed, LOG_FLUSH_MS, PROGRESS_INTERVAL_MS } from '../../src/worker/attempt-feed.js';
import type { FeedSend } from '../../src/worker/attempt-feed.js';

const creds = { runId: 'r1', taskId: 't1', attemptId: 'a1', token: 'tok', workerId: 'w1' };

function feedWith(fail = false) {
  const sent: { verb: string; body: Record<string, unknown> }[] = [];
  const send: FeedSend = (verb, body) => {
    sent.push({ verb, body: body });
    return fail ? Promise.reject(new Error('no responders')) : Promise.resolve();
  };
  let now = 0;
  const feed = new AttemptFeed(
    creds,
    send,
    () => undefined,
    () => now,
  );
  const advance = async (ms: number) => {
    now += ms;
    await vi.advanceTimersByTimeAsync(ms);
  };
  return { feed, sent, advance };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('AttemptFeed', () => {
  it('sends the first progress at once and the latest of a burst one interval later', async () => {
    const { feed, sent, advance } = feedWith();
    feed.progress(0.1);
    await advance(0);
    feed.progress(0.2);
    feed.progress(0.3);
    await advance(PROGRESS_INTERVAL_MS - 1);
    expect(sent.map((s) => s.body['value'])).toEqual([0.1]);
    await advance(1);
    expect(sent.map((s) => s.body['value'])).toEqual([0.1, 0.3]);
    expect(sent[0]).toMatchObject({ verb: 'progress', body: creds });
  });

  it('refuses a progress value that is not JSON or too large, naming the size', () => {
    const { feed } = feedWith();
    expect(() => feed.progress(undefined)).toThrow(/must be a JSON value/);
    expect(() => feed.progress('x'.repeat(2_000))).toThrow(/2002 bytes of JSON, more than 1024/);
  });

  it('gathers output per stream in order and marks the last chunk at close', async () => {
    const { feed, sent, advance } = feedWith();
    feed.write('stdout', 'a');
    feed.write('stdout', 'b');
    feed.write('stderr', 'c');
    await advance(LOG_FLUSH_MS);
    feed.write('stderr', 'd');
    await feed.close();
    expect(sent.map((s) => [s.body['stream'], s.body['text'], s.body['end']])).toEqual([
      ['stdout', 'ab', false],
      ['stderr', 'c', false],
      ['stderr', 'd', true],
    ]);
  });

  it('keeps the tail of a fast writer, counting what it dropped, never splitting a character', async () => {
    const { feed, sent } = feedWith();
    feed.write('stderr', 'x'.repeat(LOG_CHUNK_BYTES));
    feed.write('stderr', 'é'.repeat(10)); // 20 bytes
    await feed.close();
    const [chunk] = sent;
    const text = String(chunk?.body['text']);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(LOG_CHUNK_BYTES);
    expect(text.endsWith('é'.repeat(10))).toBe(true);
    expect(Number(chunk?.body['dropped']) + Buffer.byteLength(text)).toBe(LOG_CHUNK_BYTES + 20);
  });

  it('sends nothing for an attempt that wrote nothing, and nothing after close', async () => {
    const { feed, sent } = feedWith();
    await feed.close();
    feed.write('stderr', 'late');
    feed.progress(1);
    await vi.advanceTimersByTimeAsync(PROGRESS_INTERVAL_MS);
    expect(sent).toEqual([]);
  });

  it('ends a log whose output all went out already with an empty last chunk', async () => {
    const { feed, sent, advance } = feedWith();
    feed.write('stderr', 'x');
    await advance(LOG_FLUSH_MS);
    await feed.close();
    expect(sent.map((s) => [s.body['text'], s.body['end']])).toEqual([
      ['x', false],
      ['', true],
    ]);
  });

  it('drops a report the backend refuses and goes on with the next', async () => {
    const { feed, sent } = feedWith(true);
    feed.write('stderr', 'one');
    feed.progress(0.5);
    await feed.close();
    expect(sent.map((s) => s.verb)).toEqual(['progress', 'log']);
  });
});
