import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { skipSettledRequestErrors } from '../../streams/nats-internals.js';

// nats-core as transport-node loads it: the copy skipSettledRequestErrors patches.
const fromTransport = createRequire(
  createRequire(import.meta.url).resolve('@nats-io/transport-node'),
);
const internalPath = fromTransport.resolve('@nats-io/nats-core/internal');
const { RequestOne } = fromTransport(internalPath) as {
  RequestOne: new (
    mux: unknown,
    subject: string,
    opts: { timeout: number },
    asyncTraces: boolean,
  ) => {
    resolver(err: Error | null, msg: unknown): void;
    cancel(err?: Error): void;
    deferred: Promise<unknown>;
  };
};
const errorsModule = fromTransport(join(dirname(internalPath), 'errors.js')) as {
  RequestError: new (message?: string, options?: ErrorOptions) => Error;
};

/** Runs `fn` counting the RequestErrors nats-core builds meanwhile. */
async function countingRequestErrors(fn: () => Promise<void>): Promise<number> {
  const original = errorsModule.RequestError;
  let built = 0;
  errorsModule.RequestError = class extends original {
    constructor(message?: string, options?: ErrorOptions) {
      super(message, options);
      built++;
    }
  };
  try {
    await fn();
  } finally {
    errorsModule.RequestError = original;
  }
  return built;
}

function request() {
  const left: unknown[] = [];
  const mux = { cancel: (r: unknown) => left.push(r) };
  const r = new RequestOne(mux, 'subject', { timeout: 60_000 }, false);
  return { r, left };
}

describe('skipSettledRequestErrors', () => {
  it('patches the class transport-node uses, once', () => {
    expect(skipSettledRequestErrors()).toBe(true);
    expect(skipSettledRequestErrors()).toBe(true);
  });

  it('an answered request resolves and leaves the map, and builds no RequestError', async () => {
    skipSettledRequestErrors();
    const built = await countingRequestErrors(async () => {
      const { r, left } = request();
      r.resolver(null, 'answer');
      await expect(r.deferred).resolves.toBe('answer');
      expect(left).toEqual([r]);
    });
    expect(built).toBe(0);
  });

  it('a failed, a cancelled and a refused request reject as before', async () => {
    skipSettledRequestErrors();
    const failed = request();
    const cause = new Error('no responders');
    failed.r.resolver(cause, {});
    await expect(failed.r.deferred).rejects.toMatchObject({
      name: 'RequestError',
      message: 'no responders',
      cause,
    });
    expect(failed.left).toEqual([failed.r]);

    const cancelled = request();
    cancelled.r.cancel();
    await expect(cancelled.r.deferred).rejects.toMatchObject({
      name: 'RequestError',
      message: 'cancelled',
    });
    expect(cancelled.left).toEqual([cancelled.r]);

    const refused = request();
    const why = new Error('publish failed');
    refused.r.cancel(why);
    await expect(refused.r.deferred).rejects.toBe(why);
    expect(refused.left).toEqual([refused.r]);
  });
});
