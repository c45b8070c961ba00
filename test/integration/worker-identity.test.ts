import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { isApiError } from '../../src/worker/api-client.js';
import { dispatchTask } from '../../src/backend/reconciler/dispatch.js';
import { SonarClient } from '../../src/client/client.js';
import type { DispatchMessage } from '../../src/protocol.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { eventually } from '../helpers/eventually.js';
import { runFileOf, taskOf } from '../helpers/worker-fixtures.js';

// What the backend enforces whatever the server's permissions: a worker asks on its own
// subject and may act only as itself. (The permissions that keep a worker on its own
// subject are shown in the secure-mode tests.)

const nats = serverPerFile();
const backends = backendPerTest(nats);

const join = (workerId: string) => ({ workerId, host: 'h', tags: ['a'], slots: 1 });

async function world() {
  const tb = await backends.start();
  const n = tb.ctx.names;
  const as = (workerId: string) =>
    new ApiClient(nats.nc, n, {
      retryForMs: 0,
      subject: (verb) => n.subjects.workerApi(workerId, verb),
    });
  await as('w1').request('join', join('w1'));
  await as('w2').request('join', join('w2'));
  return { ctx: tb.ctx, n, as };
}

const refusal = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
  } catch (err: unknown) {
    if (isApiError(err)) return err.code;
    throw err;
  }
  throw new Error('expected a refusal');
};

describe('a worker acts under its own id only', () => {
  it('refuses leave and drain of another worker asked on its own subject', async () => {
    const { as, ctx } = await world();
    expect(await refusal(as('w1').request('leave', { workerId: 'w2' }))).toBe('forbidden');
    expect(await refusal(as('w1').request('drain', { workerId: 'w2', reason: 'shutdown' }))).toBe(
      'forbidden',
    );
    expect(ctx.loop.projection.workers.get('w2')?.snapshot.value).toBe('Active');
    // Its own leave goes through.
    await as('w1').request('leave', { workerId: 'w1' });
  });

  it('refuses a start of another tag, and a result for an attempt another worker holds, even with its token', async () => {
    const { as, ctx, n } = await world();
    await new SonarClient(nats.nc, { prefix: n.prefix }).submit(
      runFileOf('r1', [{ id: 's1', tags: ['a'], count: 1 }]),
    );
    await dispatchTask(ctx, 'r1.t0', 'a');
    const consumer = await jetstream(nats.nc).consumers.get(
      n.streams.dispatch,
      n.consumers.dispatch('a'),
    );
    const m = await consumer.next({ expires: 2_000 });
    if (!m) throw new Error('no dispatch message');
    m.ack();
    const d = m.json<DispatchMessage>();
    const attempt = { runId: d.runId, taskId: d.taskId, attemptId: d.attemptId, token: d.token };
    // A worker of another tag that took the message may not run it.
    await as('w3').request('join', { ...join('w3'), tags: ['b'] });
    expect(await refusal(as('w3').request('start', { ...attempt, workerId: 'w3' }))).toBe(
      'forbidden',
    );
    await as('w1').request('start', { ...attempt, workerId: 'w1' });
    const output = { inline: 'aGk=', bytes: 2 };
    // Under its own id, the holder check refuses it; under the holder's id, the subject does.
    expect(await refusal(as('w2').request('result', { ...attempt, workerId: 'w2', output }))).toBe(
      'stale_attempt',
    );
    expect(await refusal(as('w2').request('result', { ...attempt, workerId: 'w1', output }))).toBe(
      'forbidden',
    );
    expect(
      await refusal(
        as('w2').request('fail', { ...attempt, workerId: 'w1', exitCode: 1, error: 'x' }),
      ),
    ).toBe('forbidden');
    expect(await refusal(as('w2').request('release', { ...attempt, workerId: 'w1' }))).toBe(
      'forbidden',
    );
    expect(taskOf(ctx, 'r1', 't0')?.value).toBe('Running');
  });

  it('answers renew only on the worker own subject', async () => {
    const { n } = await world();
    const shared = new ApiClient(nats.nc, n, { retryForMs: 0 });
    const publicKey = 'UDVPD2BGZCODEIBX5DJAQZFKRNTG2RRCVULITRXT4PBTP6DFA4Y5JEVG';
    expect(await refusal(shared.request('renew', { workerId: 'w1', publicKey }))).toBe('forbidden');
  });

  it('ignores a registry entry whose value names another worker than its key', async () => {
    const { ctx, n } = await world();
    const kv = await new Kvm(nats.nc).open(n.buckets.workers);
    const forged = {
      workerId: 'w1',
      host: 'h',
      tags: ['a'],
      slots: 1,
      active: true,
      pulseAt: new Date().toISOString(),
      running: [],
    };
    await kv.put('someone-else', JSON.stringify(forged));
    await kv.put('w1', JSON.stringify(forged));
    const live = await ctx.registry.live();
    expect(live.map((e) => e.workerId)).toEqual(['w1']);
  });
});

describe('revoke', () => {
  it('declares the worker Lost at once and refuses it from then on', async () => {
    const { as, ctx, n } = await world();
    const ops = new ApiClient(nats.nc, n, { retryForMs: 0 });
    const reply = await ops.request('revoke', { workerId: 'w1' });
    // Open mode: no credential to push a revocation of.
    expect(reply).toEqual({ workerId: 'w1', revoked: true, pushed: false });
    await eventually(() => {
      const w = ctx.loop.projection.workers.get('w1')?.snapshot;
      expect(w?.value).toBe('Lost');
      expect(w?.context.lostReason).toBe('revoked');
    });
    expect(await refusal(as('w1').request('join', join('w1')))).toBe('conflict');
    expect(ctx.loop.projection.workers.get('w2')?.snapshot.value).toBe('Active');
    expect(await refusal(ops.request('revoke', { workerId: 'nobody' }))).toBe('not_found');
  });
});
