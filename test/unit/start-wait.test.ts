import { JetStreamApiError } from '@nats-io/jetstream';
import { RequestError, TimeoutError } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { createLogger } from '../../src/log.js';
import { isUnanswered, untilAnswered } from '../../src/worker/start-wait.js';
import { WAIT_OUT_FIRST_MS, WAIT_OUT_MAX_MS } from '../../src/wait-out.js';

const lines: string[] = [];
const log = createLogger({
  component: 'test',
  level: 'warn',
  destination: { write: (line) => void lines.push(line) },
});

const jsNotEnabled = (cause: unknown) =>
  Object.assign(new Error('jetstream is not enabled', { cause }), { name: 'JetStreamNotEnabled' });

describe('isUnanswered', () => {
  it('is true of silence and false of a refusal', () => {
    expect(isUnanswered(new TimeoutError())).toBe(true);
    expect(isUnanswered(new RequestError('no responders'))).toBe(true);
    expect(isUnanswered(new SonarError(ErrorCode.Unavailable, 'no answer'))).toBe(true);
    expect(isUnanswered(jsNotEnabled(new RequestError('no responders')))).toBe(true);
    // An account refused JetStream: no wait mends that.
    expect(
      isUnanswered(
        jsNotEnabled(new JetStreamApiError({ code: 503, err_code: 10039, description: 'x' })),
      ),
    ).toBe(false);
    expect(isUnanswered(new SonarError(ErrorCode.Conflict, 'Lost'))).toBe(false);
    expect(isUnanswered(new SonarError(ErrorCode.Forbidden, 'revoked'))).toBe(false);
    expect(isUnanswered(new Error('boom'))).toBe(false);
  });
});

describe('untilAnswered', () => {
  it('tries again, backing off to a ceiling and warning each time, until answered', async () => {
    lines.length = 0;
    const pauses: number[] = [];
    let calls = 0;
    const answer = await untilAnswered(
      'join',
      () => (++calls <= 6 ? Promise.reject(new TimeoutError()) : Promise.resolve('ok')),
      {
        log,
        signal: new AbortController().signal,
        sleep: (ms) => Promise.resolve(void pauses.push(ms)),
      },
    );
    expect(answer).toBe('ok');
    expect(calls).toBe(7);
    expect(pauses[0]).toBe(WAIT_OUT_FIRST_MS);
    expect(pauses.at(-1)).toBe(WAIT_OUT_MAX_MS);
    expect(lines).toHaveLength(6);
    expect(JSON.parse(lines[0]!)).toMatchObject({ step: 'join', attempt: 1, retryInMs: 500 });
  });

  it('throws a refusal at once', async () => {
    let calls = 0;
    const refused = new SonarError(ErrorCode.Conflict, 'worker w1 is Lost');
    await expect(
      untilAnswered('join', () => (calls++, Promise.reject(refused)), {
        log,
        signal: new AbortController().signal,
        sleep: () => Promise.resolve(),
      }),
    ).rejects.toBe(refused);
    expect(calls).toBe(1);
  });

  it('stops waiting once the signal aborts, with the last error', async () => {
    const stop = new AbortController();
    let calls = 0;
    const silence = new TimeoutError();
    await expect(
      untilAnswered('first pulse', () => (calls++, Promise.reject(silence)), {
        log,
        signal: stop.signal,
        sleep: () => Promise.resolve(void (calls === 3 && stop.abort())),
      }),
    ).rejects.toBe(silence);
    expect(calls).toBe(3);
  });
});
