import { describe, expect, it } from 'vitest';
import {
  READER_CONSUMER_MAX_IDLE_NS,
  checkReaderConsumer,
} from '../../src/backend/api/reader-consumer-check.js';

const INBOXES = ['_INBOX_R.client', '_INBOX_R.operator'];
const check = (rest: string, config: Record<string, unknown>) =>
  checkReaderConsumer(rest, { stream_name: rest.split('.')[0], config }, INBOXES);

describe('checkReaderConsumer: what a reader may create', () => {
  it('takes the consumers nats.js makes: an ordered pull, and push consumers into its inbox', () => {
    expect(
      check('SONAR_EVENTS.abc_1', { name: 'abc_1', ack_policy: 'none', mem_storage: true }),
    ).toEqual({
      stream: 'SONAR_EVENTS',
      name: 'abc_1',
    });
    expect(
      check('KV_sonar_results.oc_x_1.$KV.sonar_results.>', {
        name: 'oc_x_1',
        deliver_subject: '_INBOX_R.client.Ab12.1',
        ack_policy: 'none',
        inactive_threshold: 300e9,
      }),
    ).toEqual({ stream: 'KV_sonar_results', name: 'oc_x_1' });
    expect(check('SONAR_EVENTS', { ack_policy: 'none' })).toEqual({
      stream: 'SONAR_EVENTS',
      name: null,
    });
  });

  it('refuses a delivery anywhere but a reader inbox, naming the field and the value', () => {
    for (const deliver of [
      'sonar.events.run.x',
      '$KV.sonar_workers.w1',
      '_INBOX_R.backend.x',
      '_INBOX_R.client.>',
      '_INBOX_R.client.*',
      '_INBOX_R.client',
      '_INBOX_Rx.client.a',
      42,
    ]) {
      const r = check('SONAR_EVENTS', { deliver_subject: deliver });
      expect(r, String(deliver)).toEqual({
        refused: expect.stringContaining(`config.deliver_subject ${JSON.stringify(deliver)}`),
      });
    }
  });

  it('refuses durable consumers, queue groups, long idle times and mismatched names', () => {
    expect(check('SONAR_EVENTS.d', { durable_name: 'd' })).toEqual({
      refused: expect.stringContaining('config.durable_name "d"'),
    });
    expect(
      check('SONAR_EVENTS', { deliver_group: 'g', deliver_subject: '_INBOX_R.client.a' }),
    ).toEqual({
      refused: expect.stringContaining('config.deliver_group "g"'),
    });
    expect(check('SONAR_EVENTS', { inactive_threshold: READER_CONSUMER_MAX_IDLE_NS + 1 })).toEqual({
      refused: expect.stringContaining('config.inactive_threshold'),
    });
    expect(check('SONAR_EVENTS', { inactive_threshold: READER_CONSUMER_MAX_IDLE_NS })).toEqual({
      stream: 'SONAR_EVENTS',
      name: null,
    });
    expect(check('SONAR_EVENTS.a', { name: 'b' })).toEqual({
      refused: expect.stringContaining('config.name "b"'),
    });
  });

  it('refuses a request that is not a consumer create', () => {
    expect(checkReaderConsumer('SONAR_EVENTS', null, INBOXES)).toEqual({
      refused: expect.stringContaining('not a JSON object'),
    });
    expect(checkReaderConsumer('SONAR_EVENTS', {}, INBOXES)).toEqual({
      refused: expect.stringContaining('config'),
    });
    expect(checkReaderConsumer('', { config: {} }, INBOXES)).toEqual({
      refused: expect.stringContaining('stream'),
    });
  });
});
