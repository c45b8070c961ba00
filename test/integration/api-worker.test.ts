import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { dispatchTask } from '../../src/backend/reconciler/dispatch.js';
import { Kvm } from '@nats-io/kv';
import { DEFAULT_RETRY_POLICY, retryDelayMs } from '../../actors/task/retry-policy.js';
import { maxSlotsFor } from '../../src/pulse-size.js';
import { SonarClient } from '../../src/client/client.js';
import type { DispatchMessage } from '../../src/protocol.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { eventsOf, runFileOf, taskOf } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);

/** A backend, a submitted run `r1` (tasks t0, t1 on tag `a`), and a joined worker `w1`. */
async function world(env: Record<string, string> = {}) {
  const tb = await backends.start(env);
  const { ctx } = tb;
  const n = ctx.names;
  const client = new SonarClient(nats.nc, { prefix: n.prefix });
  await client.submit(runFileOf('r1', [{ id: 's1', tags: ['a'], count: 2 }]));
  const api = new ApiClient(nats.nc, n, { retryForMs: 0 });
  await api.request('join', { workerId: 'w1', host: 'h1', tags: ['a'], slots: 2 });
  const consumer = await jetstream(nats.nc).consumers.get(
    n.streams.dispatch,
    n.consumers.dispatch('a'),
  );
  /** Dispatches a task and takes its message off the queue, as a worker would. */
  const publish = async (taskId: string): Promise<DispatchMessage> => {
    await dispatchTask(ctx, `r1.${taskId}`, 'a');
    const m = await consumer.next({ expires: 2_000 });
    if (!m) throw new Error('no dispatch message');
    m.ack();
    return m.json<DispatchMessage>();
  };
  const creds = (d: DispatchMessage, workerId = 'w1') => ({
    runId: d.runId,
    taskId: d.taskId,
    attemptId: d.attemptId,
    token: d.token,
    workerId,
  });
  /** Events a worker's requests append (the finalizer running alongside appends others). */
  const count = async (taskId: string) =>
    (await eventsOf(ctx, n.subjects.task('r1', taskId))).filter((e) =>
      ['TaskStarted', 'TaskResultAccepted', 'TaskAttemptFailed', 'TaskRequeued'].includes(
        String(e.type),
      ),
    ).length;
  return { ctx, n, api, publish, creds, count, client };
}

describe('join', () => {
  it('creates the dispatch consumers before answering, and answers a retry the same', async () => {
    const { ctx, n, api } = await world();
    const reply = await api.request('join', {
      workerId: 'w2',
      host: 'h2',
      tags: ['x', 'y'],
      slots: 1,
    });
    expect(reply).toEqual({
      pulseIntervalMs: 200,
      pulseTtlMs: 2_000,
      stream: n.streams.dispatch,
      consumers: { x: 'dispatch_x', y: 'dispatch_y' },
    });
    const jsm = await jetstreamManager(nats.nc);
    await expect(jsm.consumers.info(n.streams.dispatch, 'dispatch_y')).resolves.toBeTruthy();
    const again = await api.request('join', {
      workerId: 'w2',
      host: 'h2',
      tags: ['x', 'y'],
      slots: 1,
    });
    expect(again).toEqual(reply);
    const joined = (await eventsOf(ctx, n.subjects.worker('w2'))).filter(
      (e) => e.type === 'WorkerJoined',
    );
    expect(joined).toHaveLength(1);
  });

  it('refuses the id of a joined worker with other join data, and of a Lost worker', async () => {
    const { api } = await world();
    await expect(
      api.request('join', { workerId: 'w1', host: 'h1', tags: ['a'], slots: 3 }),
    ).rejects.toMatchObject({ code: 'conflict' });
    await api.request('exited', { workerId: 'w1', code: 137 });
    await expect(
      api.request('join', { workerId: 'w1', host: 'h1', tags: ['a'], slots: 2 }),
    ).rejects.toMatchObject({ code: 'conflict', message: expect.stringMatching(/Lost/) });
  });
});

describe('join: slots bounded so that a full pulse fits in one message', () => {
  it('refuses more slots than a pulse can list, naming slots and the bound, writing nothing', async () => {
    const { ctx, n, api } = await world();
    const bound = maxSlotsFor(nats.nc.info!.max_payload);
    expect(bound).toBe(7_878); // the server's default max_payload, 1 MiB
    const join = (workerId: string, slots: number) =>
      api.request('join', { workerId, host: 'h', tags: ['big'], slots });
    await expect(join('w9', bound + 1)).rejects.toMatchObject({
      code: 'validation',
      message: expect.stringMatching(
        new RegExp(`^'slots' is ${bound + 1}, over ${bound}: a pulse lists every task`),
      ),
      details: { issues: [{ path: 'slots' }] },
    });
    await expect(join('w9', 10_000)).rejects.toMatchObject({ code: 'validation' });
    expect(await eventsOf(ctx, n.subjects.worker('w9'))).toHaveLength(0);
    const jsm = await jetstreamManager(nats.nc);
    await expect(jsm.consumers.info(n.streams.dispatch, 'dispatch_big')).rejects.toThrow();
    // At the bound it joins; 65 tags are refused by the schema.
    await expect(join('w9', bound)).resolves.toHaveProperty('stream');
    const tags = Array.from({ length: 65 }, (_, i) => `t${i}`);
    await expect(
      api.request('join', { workerId: 'w10', host: 'h', tags, slots: 1 }),
    ).rejects.toMatchObject({ code: 'validation', message: expect.stringMatching(/'tags'/) });
  });

  it('a worst-case pulse at the bound is stored by the server; at 10,000 slots it is not', async () => {
    const { n } = await world();
    const kv = await new Kvm(nats.nc).open(n.buckets.workers);
    const entry = (slots: number) =>
      JSON.stringify({
        workerId: 'w'.repeat(64),
        host: '\u0000'.repeat(255),
        instanceId: '\u0000'.repeat(255),
        tags: Array.from({ length: 64 }, (_, i) => `${i}`.padStart(64, 't')),
        slots,
        active: true,
        pulseAt: new Date().toISOString(),
        running: Array.from(
          { length: slots },
          (_, i) => `${'r'.repeat(64)}.${`${i}`.padStart(64, 't')}`,
        ),
      });
    const fits = entry(maxSlotsFor(nats.nc.info!.max_payload));
    const rev = await kv.put('worst', fits);
    // The next pulse is a compare-and-set: its header counts against max_payload too.
    await expect(kv.update('worst', fits, rev)).resolves.toBeGreaterThan(rev);
    await expect(kv.put('worst', entry(10_000))).rejects.toThrow(/max_payload size exceeded/);
  });
});

describe('attempt credentials', () => {
  it("takes progress and log only from the attempt's holder, appending no event", async () => {
    const { api, publish, creds, client, count } = await world();
    await api.request('join', { workerId: 'w2', host: 'h2', tags: ['a'], slots: 1 });
    const d = await publish('t0');
    const code = (verb: 'progress' | 'log', body: object) =>
      api.request(verb, body as never).then(
        () => 'ok',
        (err: unknown) => (err as { code?: string }).code ?? String(err),
      );
    const line = { seq: 1, parts: [{ stream: 'stderr', text: 'x\n' }] };
    // Published, not started: nobody holds it yet.
    expect(await code('progress', { ...creds(d), value: 1 })).toBe('stale_attempt');
    await api.request('start', creds(d));
    expect(await code('progress', { ...creds(d, 'w2'), value: 1 })).toBe('stale_attempt');
    expect(await code('log', { ...creds(d, 'w2'), ...line })).toBe('stale_attempt');
    expect(await code('log', { ...creds(d), ...line, token: 'f'.repeat(64) })).toBe(
      'invalid_token',
    );
    expect(await code('progress', { ...creds(d), value: 'x'.repeat(2_000) })).toBe('validation');
    const big = { seq: 1, parts: [{ stream: 'stderr', text: 'x'.repeat(33 * 1024) }] };
    expect(await code('log', { ...creds(d), ...big })).toBe('validation');
    expect(await code('progress', { ...creds(d), value: 0.25 })).toBe('ok');
    expect(await code('log', { ...creds(d), ...line })).toBe('ok');
    // A chunk sent again (its reply lost) is stored once.
    expect(await code('log', { ...creds(d), ...line })).toBe('ok');
    expect((await client.progress('r1')).get('t0')).toMatchObject({ value: 0.25, workerId: 'w1' });
    const chunks = [];
    for await (const c of client.logs('r1', 't0')) chunks.push(c);
    expect(chunks).toMatchObject([{ stream: 'stderr', text: 'x\n', seq: 1, attempt: 1 }]);
    expect(await count('t0')).toBe(1);
  });

  it('refuses a stale attempt and a forged token, appending nothing', async () => {
    const { api, publish, creds, count } = await world();
    const first = await publish('t0');
    await api.request('start', creds(first));
    await api.request('release', creds(first));
    const second = await publish('t0');
    const before = await count('t0');

    await expect(api.request('start', creds(first))).rejects.toMatchObject({
      code: 'stale_attempt',
    });
    await expect(
      api.request('result', { ...creds(first), output: { inline: '', bytes: 0 } }),
    ).rejects.toMatchObject({ code: 'stale_attempt' });
    await expect(
      api.request('start', { ...creds(second), token: 'f'.repeat(64) }),
    ).rejects.toMatchObject({ code: 'invalid_token' });
    // The old attempt's token does not open the new attempt either.
    await expect(
      api.request('start', { ...creds(second), token: first.token }),
    ).rejects.toMatchObject({ code: 'invalid_token' });
    await expect(
      api.request('start', { ...creds(second), attemptId: 'never-minted' }),
    ).rejects.toMatchObject({ code: 'stale_attempt' });
    expect(await count('t0')).toBe(before);
  });

  it('answers a retried start, result, fail and release the same, appending nothing new', async () => {
    const { ctx, api, publish, creds, count } = await world();
    const d = await publish('t0');
    const started = await api.request('start', creds(d));
    const afterStart = await count('t0');
    await expect(api.request('start', creds(d))).resolves.toEqual(started);
    expect(await count('t0')).toBe(afterStart);

    const output = { inline: Buffer.from('{"ok":true}').toString('base64'), bytes: 11 };
    const accepted = await api.request('result', { ...creds(d), output });
    const afterResult = await count('t0');
    await expect(api.request('result', { ...creds(d), output })).resolves.toEqual(accepted);
    expect(await count('t0')).toBe(afterResult);
    expect(['Finalizing', 'Succeeded']).toContain(taskOf(ctx, 'r1', 't0').value);
    // After the result, the start retried late is still the same answer.
    await expect(api.request('start', creds(d))).resolves.toEqual(started);

    const e = await publish('t1');
    await api.request('start', creds(e));
    await api.request('fail', { ...creds(e), exitCode: 3, error: 'boom', retryable: true });
    const afterFail = await count('t1');
    await api.request('fail', { ...creds(e), exitCode: 3, error: 'boom', retryable: true });
    expect(await count('t1')).toBe(afterFail);
    expect(taskOf(ctx, 'r1', 't1').value).toBe('Pending');

    const f = await publish('t1');
    await api.request('start', creds(f));
    await api.request('release', creds(f));
    const afterRelease = await count('t1');
    await api.request('release', creds(f));
    expect(await count('t1')).toBe(afterRelease);
  });

  it('refuses a report on an attempt another worker started', async () => {
    const { api, publish, creds } = await world();
    await api.request('join', { workerId: 'w2', host: 'h2', tags: ['a'], slots: 1 });
    const d = await publish('t0');
    await api.request('start', creds(d, 'w1'));
    await expect(api.request('start', creds(d, 'w2'))).rejects.toMatchObject({
      code: 'stale_attempt',
    });
    await expect(
      api.request('fail', { ...creds(d, 'w2'), exitCode: 1, error: 'x', retryable: true }),
    ).rejects.toMatchObject({ code: 'stale_attempt' });
  });
});

describe('batch', () => {
  it('answers each start and result of a batch as if sent alone, in order, each fenced', async () => {
    const { ctx, api, publish, creds, count } = await world();
    const d0 = await publish('t0');
    const d1 = await publish('t1');
    const forged = { ...creds(d1), token: 'f'.repeat(64) };
    const started = await api.request<'batch', { replies: unknown[] }>('batch', {
      workerId: 'w1',
      requests: [
        { verb: 'start', body: creds(d0) },
        { verb: 'start', body: forged },
      ],
    });
    expect(started.replies).toEqual([
      { ok: await api.request('start', creds(d0)) },
      { error: expect.objectContaining({ code: 'invalid_token' }) as unknown },
    ]);
    expect(await count('t1')).toBe(0);
    await api.request('start', creds(d1));
    const output = { inline: Buffer.from('{"ok":true}').toString('base64'), bytes: 11 };
    const results = await api.request<'batch', { replies: unknown[] }>('batch', {
      workerId: 'w1',
      requests: [
        { verb: 'result', body: { ...creds(d0), output } },
        { verb: 'result', body: { ...creds(d1), output } },
      ],
    });
    expect(results.replies).toEqual([{ ok: expect.anything() }, { ok: expect.anything() }]);
    for (const t of ['t0', 't1']) {
      expect(['Finalizing', 'Succeeded']).toContain(taskOf(ctx, 'r1', t).value);
    }
  });

  it("refuses a request in a batch that names another worker, and a bad body by its verb's schema", async () => {
    const { api, publish, creds } = await world();
    await api.request('join', { workerId: 'w2', host: 'h2', tags: ['a'], slots: 1 });
    const d = await publish('t0');
    const answer = await api.request<'batch', { replies: { error?: { code: string } }[] }>(
      'batch',
      {
        workerId: 'w1',
        requests: [
          { verb: 'start', body: creds(d, 'w2') },
          { verb: 'start', body: { ...creds(d), token: 7 } },
        ],
      },
    );
    expect(answer.replies.map((r) => r.error?.code)).toEqual(['forbidden', 'validation']);
  });
});

describe('fail', () => {
  it('sets retryAt 1 s after the first failure, doubling, capped at 5 min', async () => {
    const wait = (failures: number) => retryDelayMs(DEFAULT_RETRY_POLICY, failures);
    expect([0, 1, 2, 3].map(wait)).toEqual([1_000, 2_000, 4_000, 8_000]);
    expect(wait(9)).toBe(300_000);
    expect(wait(1_000)).toBe(300_000);
    const { ctx, n, api, publish, creds } = await world();
    const d = await publish('t0');
    await api.request('start', creds(d));
    const before = Date.now();
    await api.request('fail', { ...creds(d), exitCode: 2, error: 'x', retryable: true });
    const failed = (await eventsOf(ctx, n.subjects.task('r1', 't0'))).find(
      (r) => r.type === 'TaskAttemptFailed',
    );
    const retryAt = Date.parse((failed!.data as { retryAt: string }).retryAt);
    expect(retryAt - before).toBeGreaterThanOrEqual(900);
    expect(retryAt - before).toBeLessThan(3_000);
  });

  it('fails the task at once when retryable is false', async () => {
    const { ctx, api, publish, creds } = await world();
    const d = await publish('t0');
    await api.request('start', creds(d));
    await api.request('fail', { ...creds(d), exitCode: -1, error: 'bad input', retryable: false });
    expect(taskOf(ctx, 'r1', 't0').value).toBe('Failed');
  });
});

describe('bad requests', () => {
  it('refuses malformed payloads with a validation error naming the field, writing nothing', async () => {
    const { ctx, n, api, publish, creds, count } = await world();
    const d = await publish('t0');
    const before = await count('t0');
    const raw = async (verb: string, body: string) =>
      JSON.parse(
        new TextDecoder().decode((await nats.nc.request(n.subjects.api(verb), body)).data),
      ) as {
        error?: { code: string; message: string };
      };

    expect((await raw('start', 'not json')).error).toMatchObject({ code: 'validation' });
    const missing = await raw('start', JSON.stringify({ runId: 'r1', taskId: 't0' }));
    expect(missing.error?.message).toMatch(/'attemptId'/);
    const unknown = await raw('start', JSON.stringify({ ...creds(d), extra: 1 }));
    expect(unknown.error?.message).toMatch(/extra/);
    const badId = await raw('start', JSON.stringify({ ...creds(d), workerId: 'no spaces' }));
    expect(badId.error).toMatchObject({ code: 'validation' });
    expect(badId.error?.message).toMatch(/'workerId'/);
    expect((await raw('nope', '{}')).error).toMatchObject({ code: 'not_found' });
    await expect(
      api.request('join', { workerId: 'w9', host: 'h', tags: [], slots: 1 }),
    ).rejects.toMatchObject({ code: 'validation' });
    expect(await count('t0')).toBe(before);
    expect(ctx.loop.projection.workers.has('w9')).toBe(false);
  });

  it('refuses an output over SONAR_MAX_OUTPUT or a bad inline output, writing nothing', async () => {
    const { api, publish, creds, count } = await world({ SONAR_MAX_OUTPUT: '1KiB' });
    const d = await publish('t0');
    await api.request('start', creds(d));
    const before = await count('t0');
    await expect(
      api.request('result', { ...creds(d), output: { ref: 'r1/t0/x', bytes: 4096 } }),
    ).rejects.toMatchObject({
      code: 'validation',
      message: expect.stringMatching(
        /'output.bytes' is 4096 bytes, over SONAR_MAX_OUTPUT \(1KiB\)/,
      ),
    });
    await expect(
      api.request('result', { ...creds(d), output: { inline: 'aGk=', bytes: 5 } }),
    ).rejects.toMatchObject({ code: 'validation', message: expect.stringMatching(/decodes to 2/) });
    expect(await count('t0')).toBe(before);
  });
});

describe('result refs', () => {
  it("refuses a ref that is not the attempt's own object, writing nothing", async () => {
    const { api, publish, creds, count } = await world();
    const d = await publish('t0');
    const other = await publish('t1');
    await api.request('start', creds(d));
    const before = await count('t0');
    const foreign = [
      `r1/t1/${other.attemptId}`, // another task's output
      'r1/t0/a-previous', // another attempt of this task
      '../../etc/passwd',
    ];
    for (const ref of foreign) {
      await expect(
        api.request('result', { ...creds(d), output: { ref, bytes: 20_000 } }),
      ).rejects.toMatchObject({
        code: 'validation',
        message: expect.stringContaining(
          `'output.ref' is ${JSON.stringify(ref)}, not this attempt's own object "r1/t0/${d.attemptId}"`,
        ),
      });
    }
    expect(await count('t0')).toBe(before);
    const own = `r1/t0/${d.attemptId}`;
    await api.request('result', { ...creds(d), output: { ref: own, bytes: 20_000 } });
    expect(await count('t0')).toBe(before + 1);
  });
});

describe('worker lifecycle', () => {
  it('drain and leave are idempotent; a Left worker gets conflict', async () => {
    const { ctx, n, api, publish, creds } = await world();
    await ctx.registry.kv.put('w1', JSON.stringify({ workerId: 'w1' }));
    await api.request('drain', { workerId: 'w1', reason: 'shutdown' });
    await api.request('drain', { workerId: 'w1', reason: 'shutdown' });
    await api.request('leave', { workerId: 'w1' });
    await api.request('leave', { workerId: 'w1' });
    const types = (await eventsOf(ctx, n.subjects.worker('w1'))).map((e) => e.type);
    expect(types).toEqual(['WorkerJoined', 'WorkerDraining', 'WorkerLeft']);
    expect(await ctx.registry.kv.get('w1')).toMatchObject({ operation: 'DEL' });
    const d = await publish('t0');
    await expect(api.request('start', creds(d))).rejects.toMatchObject({ code: 'conflict' });
    await expect(
      api.request('drain', { workerId: 'w1', reason: 'shutdown' }),
    ).rejects.toMatchObject({ code: 'conflict' });
  });

  it('exited deletes the registry key and appends WorkerLost{exited} with the last pulse', async () => {
    const { ctx, n, api } = await world();
    await ctx.registry.kv.put('w1', JSON.stringify({ workerId: 'w1' }));
    await api.request('exited', { workerId: 'w1', code: null, signal: 'SIGKILL' });
    await api.request('exited', { workerId: 'w1', code: null, signal: 'SIGKILL' });
    const lost = (await eventsOf(ctx, n.subjects.worker('w1'))).filter(
      (e) => e.type === 'WorkerLost',
    );
    expect(lost).toHaveLength(1);
    expect(lost[0]!.data).toMatchObject({ reason: 'exited', lastPulseAt: expect.any(String) });
    expect(await ctx.registry.kv.get('w1')).toMatchObject({ operation: 'DEL' });
    await expect(api.request('exited', { workerId: 'nobody' })).rejects.toMatchObject({
      code: 'not_found',
    });
  });
});
