import { describe, expect, it } from 'vitest';
import { applyEvent, createProjection } from '../../actors/projection.js';
import type { EventRecord } from '../../actors/projection.js';
import { OwnWrites } from '../../src/backend/projection/own-writes.js';
import { encodeEnvelope } from '../../streams/envelope.js';
import { taskCreated } from '../helpers/event-builders.js';

const SUBJECT = 'sonar.events.task.r1.t1';
const created = taskCreated({ runId: 'r1', taskId: 't1' });
const event = { id: 'create.r1.t1', type: created.type, data: created.data };

describe('OwnWrites', () => {
  it('knows a payload byte for byte equal to the one it was given, once', () => {
    const own = new OwnWrites();
    const payload = encodeEnvelope(event);
    own.expect(SUBJECT, payload, event);
    // A copy, as the stream delivers it: equal bytes, another buffer.
    expect(own.recognize(SUBJECT, Uint8Array.from(payload))).toBe(event);
    expect(own.recognize(SUBJECT, payload)).toBeUndefined();
    expect(own.size).toBe(0);
  });

  it('does not know the same event id stored with other data (another writer won)', () => {
    const own = new OwnWrites();
    own.expect(SUBJECT, encodeEnvelope(event), event);
    const theirs = encodeEnvelope({ ...event, data: { ...created.data, tags: ['gpu'] } });
    expect(own.recognize(SUBJECT, theirs)).toBeUndefined();
    expect(own.recognize('sonar.events.task.r1.t2', encodeEnvelope(event))).toBeUndefined();
  });

  it('forget drops only the entry of that very payload', () => {
    const own = new OwnWrites();
    const first = encodeEnvelope(event);
    const second = encodeEnvelope({ ...event, id: 'again' });
    own.expect(SUBJECT, first, event);
    own.expect(SUBJECT, second, { ...event, id: 'again' }); // a later write to the subject
    own.forget(SUBJECT, first);
    expect(own.size).toBe(1);
    own.forget(SUBJECT, second);
    expect(own.size).toBe(0);
  });
});

describe('applyEvent with a validated record', () => {
  const record = (over: Partial<EventRecord>): EventRecord => ({
    seq: 1,
    subject: SUBJECT,
    time: '2026-01-01T00:00:05.000Z',
    type: created.type,
    data: created.data,
    v: 1,
    id: event.id,
    ...over,
  });

  it('folds to the same projection as the decoded record', () => {
    const decoded = createProjection();
    const validated = createProjection();
    expect(applyEvent(decoded, record({})).ok).toBe(true);
    expect(applyEvent(validated, record({ validated: true })).ok).toBe(true);
    expect(validated.tasks.get('r1.t1')).toEqual(decoded.tasks.get('r1.t1'));
    expect(validated.stepTasks).toEqual(decoded.stepTasks);
  });

  it('is still judged by the machine: a second TaskCreated is refused', () => {
    const p = createProjection();
    applyEvent(p, record({ validated: true }));
    const again = applyEvent(p, record({ seq: 2, validated: true }));
    expect(again.ok).toBe(false);
  });
});
