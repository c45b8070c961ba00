import { describe, expect, it } from 'vitest';
import {
  READER_CONSUMER_MAX_IDLE_NS,
  checkReaderConsumer,
} from '../../src/backend/api/reader-consumer-check.js';

const INBOXES = ['_INBOX_R.client', '_INBOX_R.operator'];
const check = (rest: string, config: Record<string, unknown>) =>
  checkReaderConsumer(rest, { stream_name: rest.split('.')[0], config }, INBOXES);
/** A request as its bytes arrive: JSON text, parsed as the backend parses it. */
const checkText = (rest: string, text: string) =>
  checkReaderConsumer(rest, JSON.parse(text), INBOXES);
const refused = (text: string) => ({ refused: expect.stringContaining(text) });

describe('checkReaderConsumer: what a reader may create', () => {
  it('takes the consumers nats.js makes, and rebuilds the create from its checked fields', () => {
    const ordered = {
      name: 'abc_1',
      deliver_policy: 'by_start_sequence',
      opt_start_seq: 1,
      ack_policy: 'none',
      inactive_threshold: 300e9,
      num_replicas: 1,
      max_deliver: 1,
      mem_storage: true,
    };
    expect(check('SONAR_EVENTS.abc_1', ordered)).toEqual({
      stream: 'SONAR_EVENTS',
      name: 'abc_1',
      body: { stream_name: 'SONAR_EVENTS', config: ordered },
    });
    const listing = {
      deliver_policy: 'last_per_subject',
      ack_policy: 'none',
      filter_subject: '$KV.sonar_results.>',
      flow_control: true,
      idle_heartbeat: 30e9,
      headers_only: true,
      inactive_threshold: 300e9,
      num_replicas: 1,
      max_deliver: 1,
      name: 'oc_x_1',
      deliver_subject: '_INBOX_R.client.Ab12.1',
    };
    expect(check('KV_sonar_results.oc_x_1.$KV.sonar_results.>', listing)).toMatchObject({
      stream: 'KV_sonar_results',
      name: 'oc_x_1',
    });
    expect(check('SONAR_EVENTS', { ack_policy: 'none' })).toMatchObject({
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
    ]) {
      expect(check('SONAR_EVENTS', { deliver_subject: deliver }), deliver).toEqual(
        refused(`config.deliver_subject ${JSON.stringify(deliver)}`),
      );
    }
    expect(check('SONAR_EVENTS', { deliver_subject: 42 })).toEqual(
      refused('config.deliver_subject 42'),
    );
  });

  it('refuses a field it does not check, however it is spelt: the server reads keys without case', () => {
    for (const key of [
      'Deliver_Subject',
      'DELIVER_SUBJECT',
      'ſeliver_subject',
      'durable_name',
      'Durable_Name',
      'deliver_group',
      'direct',
      'filter_subjects',
      'Inactive_Threshold',
      'Name',
      '__proto__',
      'constructor',
    ]) {
      expect(
        checkText('SONAR_EVENTS', `{"config":{"${key}":"sonar.events.run.x","ack_policy":"none"}}`),
        key,
      ).toEqual(refused(`config.${key}`));
    }
    expect(
      checkText(
        'SONAR_EVENTS',
        '{"config":{"ack_policy":"none"},"Config":{"deliver_subject":"$KV.x.y"}}',
      ),
    ).toEqual(refused('"Config"'));
  });

  it('sends JetStream only the checked fields, whatever the request repeated', () => {
    // JSON.parse keeps the last `config`; the server would merge both: the rebuilt body has one
    const r = checkText(
      'SONAR_EVENTS',
      '{"config":{"deliver_subject":"sonar.events.x"},"config":{"ack_policy":"none"}}',
    );
    expect(r).toMatchObject({
      body: { stream_name: 'SONAR_EVENTS', config: { ack_policy: 'none' } },
    });
    expect(JSON.stringify((r as { body: unknown }).body)).toBe(
      '{"stream_name":"SONAR_EVENTS","config":{"ack_policy":"none"}}',
    );
  });

  it('refuses long idle times, replicas, bad values and mismatched names', () => {
    expect(check('SONAR_EVENTS', { inactive_threshold: READER_CONSUMER_MAX_IDLE_NS + 1 })).toEqual(
      refused('config.inactive_threshold'),
    );
    expect(
      check('SONAR_EVENTS', { inactive_threshold: READER_CONSUMER_MAX_IDLE_NS }),
    ).toMatchObject({ name: null });
    expect(check('SONAR_EVENTS', { num_replicas: 3 })).toEqual(refused('config.num_replicas 3'));
    expect(check('SONAR_EVENTS', { ack_policy: 'sometimes' })).toEqual(
      refused('config.ack_policy "sometimes"'),
    );
    expect(check('SONAR_EVENTS.a', { name: 'b' })).toEqual(refused('config.name "b"'));
    expect(
      checkReaderConsumer('SONAR_EVENTS', { stream_name: 'KV_sonar_workers', config: {} }, INBOXES),
    ).toEqual(refused('stream_name "KV_sonar_workers"'));
  });

  it('refuses a request that is not a consumer create', () => {
    expect(checkReaderConsumer('SONAR_EVENTS', null, INBOXES)).toEqual(
      refused('not a JSON object'),
    );
    expect(checkReaderConsumer('SONAR_EVENTS', [], INBOXES)).toEqual(refused('not a JSON object'));
    expect(checkReaderConsumer('SONAR_EVENTS', {}, INBOXES)).toEqual(refused('config'));
    expect(checkReaderConsumer('', { config: {} }, INBOXES)).toEqual(refused('stream'));
  });
});
