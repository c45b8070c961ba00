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

  it('sends what was written per flush as one numbered chunk, in order, streams apart', async () => {
    const { feed, sent, advance } = feedWith();
    feed.write('stdout', 'a');
    feed.write('stdout', 'b');
    feed.write('stderr', 'c');
    await advance(LOG_FLUSH_MS);
    feed.write('stderr', 'd');
    await feed.close();
    expect(sent.map((s) => [s.verb, s.body['seq'], s.body['parts']])).toEqual([
      [
        'log',
        1,
        [
          { stream: 'stdout', text: 'ab' },
          { stream: 'stderr', text: 'c' },
        ],
      ],
      ['log', 2, [{ stream: 'stderr', text: 'd' }]],
    ]);
  });

  it('keeps the tail of a fast writer, counting what it dropped, never splitting a character', async () => {
    const { feed, sent } = feedWith();
    feed.write('stderr', 'x'.repeat(LOG_CHUNK_BYTES));
    feed.write('stderr', 'é'.repeat(10)); // 20 bytes
    await feed.close();
    const parts = sent[0]?.body['parts'] as { text: string }[];
    const text = parts.map((p) => p.text).join('');
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(LOG_CHUNK_BYTES);
    expect(text.endsWith('é'.repeat(10))).toBe(true);
    expect(Number(sent[0]?.body['dropped']) + Buffer.byteLength(text)).toBe(LOG_CHUNK_BYTES + 20);
  });

  it('holds one chunk in flight: what is written meanwhile goes in the next, bounded', async () => {
    let release!: () => void;
    const sent: Record<string, unknown>[] = [];
    const feed = new AttemptFeed(
      creds,
      (_verb, body) => {
        sent.push(body);
        return new Promise<void>((resolve) => (release = resolve));
      },
      () => undefined,
    );
    feed.write('stderr', 'first');
    await vi.advanceTimersByTimeAsync(LOG_FLUSH_MS);
    for (let i = 0; i < 100; i++) {
      feed.write('stderr', 'y'.repeat(4096));
      await vi.advanceTimersByTimeAsync(LOG_FLUSH_MS);
    }
    expect(sent).toHaveLength(1);
    release();
    await vi.advanceTimersByTimeAsync(0);
    expect(sent).toHaveLength(2);
    const parts = sent[1]?.['parts'] as { text: string }[];
    expect(Buffer.byteLength(parts.map((p) => p.text).join(''))).toBe(LOG_CHUNK_BYTES);
    expect(sent[1]?.['dropped']).toBe(100 * 4096 - LOG_CHUNK_BYTES);
    release();
    await feed.close();
  });

  it('drops pending progress at close, and an abandoned feed sends nothing more', async () => {
    const { feed, sent, advance } = feedWith();
    feed.progress(0.1);
    await advance(0);
    feed.progress(0.2);
    await feed.close();
    expect(sent.map((s) => s.body['value'])).toEqual([0.1]);
    const other = feedWith();
    other.feed.write('stderr', 'x');
    other.feed.abandon();
    await other.advance(LOG_FLUSH_MS);
    expect(other.sent).toEqual([]);
  });

  it('drops a report the backend refuses and goes on with the next', async () => {
    const { feed, sent, advance } = feedWith(true);
    feed.progress(0.5);
    await advance(0);
    feed.write('stderr', 'one');
    await advance(LOG_FLUSH_MS);
    feed.write('stderr', 'two');
    await feed.close();
    expect(sent.map((s) => [s.verb, s.body['seq']])).toEqual([
      ['progress', undefined],
      ['log', 1],
      ['log', 2],
    ]);
  });
});
