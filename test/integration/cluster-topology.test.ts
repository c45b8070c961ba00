import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
import { whenPlaceable } from '../../src/backend/storage/index.js';
import { createLogger } from '../../src/log.js';
import { taskCreated, taskPublished, taskRequeued } from '../helpers/event-builders.js';
import { eventually } from '../helpers/eventually.js';
import { clusterPerFile } from '../helpers/cluster-per-file.js';
import { freshPrefix } from '../helpers/topology.js';

const nats = clusterPerFile(3);

describe('topology on a 3-node cluster', () => {
  it('with replicas 3 survives one node restart, and appends keep working', async () => {
    const jsm = await jetstreamManager(nats.nc);
    const n = names(freshPrefix());
    const opts = { ...DEFAULT_TOPOLOGY_OPTIONS, replicas: 3 };
    // As the backend does: a cluster just formed may not yet place three replicas.
    const created = await whenPlaceable(() => ensureTopology(jsm, n, opts), {
      replicas: 3,
      log: createLogger({ component: 'test', level: 'error' }),
    });
    expect(created.every((c) => c.action === 'created')).toBe(true);
    const again = await ensureTopology(jsm, n, opts);
    expect(again.every((c) => c.action === 'unchanged')).toBe(true);
    const info = await jsm.streams.info(n.streams.events);
    expect(info.config.num_replicas).toBe(3);

    const store = new EventStore(nats.nc, n);
    const subject = n.subjects.task('r1', 't1');
    let seq = (
      await store.append(subject, { id: 'c1', ...pick(taskCreated()) }, { expectedSeq: 0 })
    ).seq;

    // Stop the node that leads the events stream, then keep appending through the failover.
    const leader = info.cluster?.leader;
    const index = nats.servers.servers.findIndex((s) => s.name === leader);
    expect(index).toBeGreaterThanOrEqual(0);
    await nats.servers.stopNode(index);
    let attempt = 0;
    for (let i = 1; i <= 5; i++) {
      const event =
        i % 2 === 1
          ? taskPublished({ attempt: ++attempt })
          : taskRequeued({ attemptId: `a${attempt}` });
      // Retried with the same id: during failover the server answers 503 for ~100 ms, and a
      // retry of an append that did land is a duplicate, stored once.
      const id = `e${i}`;
      const ack = await eventually(
        () =>
          store
            .append(subject, { id, ...pick(event) }, { expectedSeq: seq })
            .catch(async (err: unknown) => {
              const last = await store.lastSeqOf(subject);
              if (last !== seq) return { seq: last, duplicate: true };
              throw err;
            }),
        { timeoutMs: 20_000 },
      );
      seq = ack.seq;
    }
    await nats.servers.restartNode(index);
    await eventually(
      async () => {
        const i = await jsm.streams.info(n.streams.events);
        return (
          (i.cluster?.replicas ?? []).length === 2 &&
          (i.cluster?.replicas ?? []).every((r) => r.current)
        );
      },
      { timeoutMs: 20_000 },
    );
    const again2 = await ensureTopology(jsm, n, opts);
    expect(again2.every((c) => c.action === 'unchanged')).toBe(true);
    const events = await store.readAggregate(subject);
    expect(events.map((e) => e.type)).toEqual([
      'TaskCreated',
      'TaskPublished',
      'TaskRequeued',
      'TaskPublished',
      'TaskRequeued',
      'TaskPublished',
    ]);
    await store.append(
      subject,
      { id: 'after', ...pick(taskRequeued({ attemptId: 'a3' })) },
      { expectedSeq: seq },
    );
  });
});

const pick = (e: { type: string; data: unknown }) => ({ type: e.type, data: e.data });
