/**
 * Secure mode on a cluster (the chaos cluster scenario runs on one): every node in operator
 * mode with a full resolver of its own and the generated `resolver_preload`. On the
 * nats-server in use (2.9.10 here) each node must know the Sonar account from the start,
 * replicate its streams, and apply a revocation pushed through any one node.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { jetstreamManagerOf } from '../../streams/jetstream-api.js';
import { names } from '../../streams/names.js';
import { pushRevocation } from '../../src/auth/revoke.js';
import { eventually } from '../helpers/eventually.js';
import { secureClusterPerFile } from '../helpers/secure-per-file.js';
import { freshPrefix } from '../helpers/topology.js';

const secure = secureClusterPerFile({ prefix: freshPrefix(), size: 3 });
const conns: NatsConnection[] = [];

afterAll(async () => {
  for (const c of conns) await c.close().catch(() => {});
});

/** A connection as `role` to node `i` alone. */
async function onNode(i: number, role: 'backend' | 'operator' | 'sys'): Promise<NatsConnection> {
  const nc = await secure().connectAs(role, { servers: secure().urls[i]!, reconnect: false });
  conns.push(nc);
  return nc;
}

describe('a secure cluster', () => {
  it('every node knows the account from resolver_preload and serves its R3 streams', async () => {
    const n = names(secure().prefix);
    // the events stream: the one every reader reads, from the readers' account
    const stream = n.streams.events;
    const backend = await onNode(0, 'backend');
    const jsm = await jetstreamManager(backend);
    await eventually(
      () => jsm.streams.add({ name: stream, subjects: [n.subjects.eventsAll], num_replicas: 3 }),
      { timeoutMs: 20_000, message: 'R3 stream created' },
    );
    for (let i = 0; i < 3; i++) {
      const operator = await onNode(i, 'operator');
      const info = await (await jetstreamManagerOf(operator, n)).streams.info(stream);
      expect(info.config.num_replicas).toBe(3);
      expect(info.cluster?.replicas ?? []).toHaveLength(2);
    }
  });

  it('a revocation pushed through one node cuts the worker off on another', async () => {
    const wx = await secure().mintWorker('wx', { now: Date.now() - 2_000 });
    const asWorker = (): Promise<NatsConnection> =>
      secure().connectAsWorker(wx, { servers: secure().urls[2]!, reconnect: false });
    const worker = await asWorker();
    conns.push(worker);
    const closed = worker.closed();
    await pushRevocation({
      sys: await onNode(0, 'sys'),
      accountPublicKey: secure().credentials.workersAccount.publicKey,
      operatorSigningSeed: secure().credentials.operator.signingSeed,
      userPublicKey: wx.key.getPublicKey(),
      at: Date.now(),
      maxCredentialTtlMs: 60_000,
    });
    // Node 3 learnt it from node 1: the live connection is closed, a new one refused.
    const outcome = await Promise.race([
      closed.then(() => 'closed'),
      new Promise((resolve) => setTimeout(() => resolve('still open'), 10_000)),
    ]);
    expect(outcome).toBe('closed');
    await expect(asWorker()).rejects.toThrow(/authoriz/i);
  });
});
