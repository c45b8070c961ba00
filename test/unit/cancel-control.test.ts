import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { cancelOf } from '../../src/worker/cancel-control.js';

const bytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe('cancelOf: the backend’s cancel broadcast, told from answers routed onto its subject', () => {
  it('takes a bare message: no reply, no headers', () => {
    expect(cancelOf({ data: bytes({ runId: 'r1' }), reply: '', headers: undefined })).toEqual({
      runId: 'r1',
    });
    expect(
      cancelOf({ data: bytes({ runId: 'r1', taskId: 't1' }), reply: '', headers: undefined }),
    ).toEqual({ runId: 'r1', taskId: 't1' });
  });

  it('ignores a JetStream delivery (its ack subject as reply) and a direct get (its headers)', () => {
    const body = bytes({ runId: 'r1', taskId: 't1', attemptId: 'a', token: 'x' });
    expect(
      cancelOf({ data: body, reply: '$JS.ACK.SONAR_DISPATCH.c.1.1.1.1.0', headers: undefined }),
    ).toBeNull();
    const h = headers();
    h.set('Nats-Stream', 'KV_sonar_workers');
    expect(cancelOf({ data: bytes({ runId: 'r1' }), reply: '', headers: h })).toBeNull();
  });

  it('ignores what is not a cancel', () => {
    for (const data of [
      bytes({ stream: 'S', seq: 1 }),
      bytes({ ok: { runId: 'r1' } }),
      new Uint8Array([0xff]),
    ]) {
      expect(cancelOf({ data, reply: '', headers: undefined })).toBeNull();
    }
  });
});
