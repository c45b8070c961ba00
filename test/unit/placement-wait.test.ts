import { JetStreamApiError } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { whenPlaceable } from '../../src/backend/storage/placement-wait.js';
import { WAIT_OUT_FIRST_MS, WAIT_OUT_MAX_MS } from '../../src/wait-out.js';
import { createLogger } from '../../src/log.js';

const log = createLogger({ component: 'test', level: 'silent' });
const apiError = (errCode: number, description: string) =>
  new JetStreamApiError({ code: 500, err_code: errCode, description });

describe('whenPlaceable', () => {
  it('retries "no suitable peers", backing off to a ceiling, until provisioning succeeds', async () => {
    const pauses: number[] = [];
    let calls = 0;
    const result = await whenPlaceable(
      () => {
        if (++calls <= 6) return Promise.reject(apiError(10005, 'no suitable peers for placement'));
        return Promise.resolve('provisioned');
      },
      { replicas: 3, log, sleep: (ms) => Promise.resolve(void pauses.push(ms)) },
    );
    expect(result).toBe('provisioned');
    expect(calls).toBe(7);
    expect(pauses[0]).toBe(WAIT_OUT_FIRST_MS);
    expect(pauses.at(-1)).toBe(WAIT_OUT_MAX_MS);
    expect(pauses).toEqual([...pauses].sort((a, b) => a - b));
  });

  it('retries "stream not found": a stream just created, not yet applied on every server', async () => {
    let calls = 0;
    const result = await whenPlaceable(
      () => {
        if (++calls <= 2) return Promise.reject(apiError(10059, 'stream not found'));
        return Promise.resolve('provisioned');
      },
      { replicas: 1, log, sleep: () => Promise.resolve() },
    );
    expect(result).toBe('provisioned');
    expect(calls).toBe(3);
  });

  it('throws any other error at once', async () => {
    let calls = 0;
    const refused = whenPlaceable(
      () => {
        calls++;
        return Promise.reject(apiError(10074, 'replicas > 1 not supported in non-clustered mode'));
      },
      { replicas: 3, log, sleep: () => Promise.resolve() },
    );
    await expect(refused).rejects.toThrow(/non-clustered/);
    expect(calls).toBe(1);
  });
});
