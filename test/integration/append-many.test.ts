/**
 * EventStore.appendMany, a window of publishes in flight (AckedPublisher.publishAll): the
 * same guarantees as `append`, many at once: the expected last subject sequence, msg-id
 * dedupe, results in input order, one refusal not stopping the others.
 */
import { describe, expect, it } from 'vitest';
import type { SonarEvent } from '../../actors/events.js';
import { encodeEnvelope } from '../../streams/envelope.js';
import { ConcurrencyError } from '../../streams/errors.js';
import { EventStore } from '../../streams/event-store.js';
import type { AppendItem } from '../../streams/event-store.js';
import { taskCreated, taskPublished } from '../helpers/event-builders.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshStore, freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();

const item = (subject: string, id: string, e: SonarEvent, expectedSeq?: number): AppendItem => ({
  subject,
  event: { id, type: e.type, data: e.data },
  ...(expectedSeq !== undefined && { expectedSeq }),
});

describe('EventStore.appendMany', () => {
  it('appends many aggregates, a window at a time, results in input order', async () => {
    const { n, store } = await freshStore(nats.nc);
    const items = Array.from({ length: 300 }, (_, i) =>
      item(n.subjects.task('r1', `t${i}`), `c${i}`, taskCreated({ taskId: `t${i}` }), 0),
    );
    const results = await store.appendMany(items, 16);
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
    const seqs = results.map((r) => (r as PromiseFulfilledResult<{ seq: number }>).value.seq);
    expect(new Set(seqs).size).toBe(300);
    for (const [i, it] of items.entries()) {
      expect(await store.lastSeqOf(it.subject)).toBe(seqs[i]);
    }
  });

  it('a stale expected sequence is a ConcurrencyError for that entry only', async () => {
    const { n, store } = await freshStore(nats.nc);
    const a = n.subjects.task('r1', 'a');
    const b = n.subjects.task('r1', 'b');
    const [created] = await store.appendMany([item(a, 'ca', taskCreated({ taskId: 'a' }), 0)]);
    expect(created?.status).toBe('fulfilled');
    const results = await store.appendMany([
      item(a, 'pa', taskPublished(), 0), // stale: a holds one event
      item(b, 'cb', taskCreated({ taskId: 'b' }), 0),
    ]);
    expect(results[0]?.status).toBe('rejected');
    const reason = (results[0] as PromiseRejectedResult).reason as ConcurrencyError;
    expect(reason).toBeInstanceOf(ConcurrencyError);
    expect(reason.subject).toBe(a);
    expect(reason.expectedSeq).toBe(0);
    expect(results[1]?.status).toBe('fulfilled');
    expect(await store.readAggregate(a)).toHaveLength(1);
  });

  it('a repeated msg id is stored once and answered as a duplicate', async () => {
    const { n, store } = await freshStore(nats.nc);
    const subject = n.subjects.task('r1', 't1');
    const e = taskCreated();
    const [first] = await store.appendMany([item(subject, 'same', e, 0)]);
    // No expectation this time: only the dedupe window can refuse it.
    const [again] = await store.appendMany([item(subject, 'same', e)]);
    const seq = (first as PromiseFulfilledResult<{ seq: number }>).value.seq;
    expect(again).toEqual({ status: 'fulfilled', value: { seq, duplicate: true } });
    expect(await store.readAggregate(subject)).toHaveLength(1);
  });

  it('stores a given payload as is, and the event id as its msg id', async () => {
    const { n, store } = await freshStore(nats.nc);
    const subject = n.subjects.task('r1', 't1');
    const e = taskCreated();
    const event = { id: 'pre', type: e.type, data: e.data };
    const payload = encodeEnvelope(event);
    await store.appendMany([{ subject, event, expectedSeq: 0, payload }]);
    const [stored] = await store.readAggregate(subject);
    expect(stored).toMatchObject({ id: 'pre', type: 'TaskCreated', data: e.data });
  });

  it('an empty batch answers at once', async () => {
    const n = await freshTopology(nats.nc);
    await expect(new EventStore(nats.nc, n).appendMany([])).resolves.toEqual([]);
  });
});
