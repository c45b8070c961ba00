/**
 * What a backend lets a reader (client, operator) create as a consumer, decided on the
 * request alone (docs/threat-model.md). A consumer's `deliver_subject` is a subject of the
 * application account, where the server pushes the stream's messages: aimed at a stream's
 * subject, it would write into that stream. A create that names a consumer already there
 * changes that consumer: another reader's, or one of the backend's. So a reader's consumer is
 * ephemeral, new, and delivers only into a reader's inbox (or is pulled).
 *
 * The request is never passed on as it came: nats-server reads JSON keys without regard to
 * case and merges repeated keys, where JSON.parse keeps the last one exactly as spelt, so a
 * body this code read one way could mean another to the server. The create JetStream gets is
 * rebuilt here from the fields below, each checked by type and value; any other field is
 * refused, naming it.
 */

/** The longest a reader's consumer outlives its last use: a replay's pause, not a day. */
export const READER_CONSUMER_MAX_IDLE_NS = 60 * 60 * 1_000_000_000;

/** The consumer a create asks for, and the create to send JetStream in its place. */
export interface ReaderConsumerRequest {
  stream: string;
  name: string | null;
  /** The rebuilt create request: `{stream_name, config, action?}`, checked fields only. */
  body: { stream_name: string; config: Record<string, unknown>; action?: 'create' };
}

/** A refusal, in words that name the field and the value. */
export interface Refusal {
  refused: string;
}

type FieldCheck = (v: unknown) => boolean;
const isString: FieldCheck = (v) => typeof v === 'string' && v.length <= 1_024;
const isCount: FieldCheck = (v) => Number.isSafeInteger(v) && (v as number) >= -1;
const isBool: FieldCheck = (v) => typeof v === 'boolean';
const oneOf =
  (...values: string[]): FieldCheck =>
  (v) =>
    typeof v === 'string' && values.includes(v);

/**
 * The consumer config fields a reader may set: those nats.js 3.4 sends for an ordered
 * consumer (pull), a KV listing or watch, and an object read (push). `deliver_subject`,
 * `name` and `inactive_threshold` are checked further below.
 */
const FIELDS: Record<string, FieldCheck> = {
  name: isString,
  description: isString,
  deliver_subject: isString,
  deliver_policy: oneOf(
    'all',
    'last',
    'new',
    'by_start_sequence',
    'by_start_time',
    'last_per_subject',
  ),
  opt_start_seq: isCount,
  opt_start_time: isString,
  ack_policy: oneOf('none', 'all', 'explicit'),
  ack_wait: isCount,
  max_deliver: isCount,
  max_ack_pending: isCount,
  replay_policy: oneOf('instant', 'original'),
  filter_subject: isString,
  flow_control: isBool,
  idle_heartbeat: isCount,
  headers_only: isBool,
  inactive_threshold: isCount,
  num_replicas: (v) => v === 0 || v === 1,
  mem_storage: isBool,
};

const TOKEN = /^[^\s.*>]+$/;

/** The fields of the create request itself, around its `config`. */
const REQUEST_FIELDS = new Set(['stream_name', 'config', 'action', 'pedantic']);

/**
 * Checks a reader's consumer create: `rest` is the create subject after `CONSUMER.CREATE.`
 * (`<stream>[.<name>[.<filter>]]`), `body` the parsed JetStream create request.
 * `inboxPrefixes` are the readers' inbox prefixes (`_INBOX_R.client`, ...), where push
 * consumers may deliver.
 */
export function checkReaderConsumer(
  rest: string,
  body: unknown,
  inboxPrefixes: readonly string[],
): ReaderConsumerRequest | Refusal {
  const [stream = '', subjectName] = rest.split('.');
  if (!TOKEN.test(stream)) {
    return { refused: `stream ${JSON.stringify(stream)} is not a stream name` };
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { refused: 'the request is not a JSON object' };
  }
  for (const key of Object.keys(body)) {
    if (!REQUEST_FIELDS.has(key)) {
      return { refused: `${JSON.stringify(key)}: not a field of a reader's consumer create` };
    }
  }
  // nats.js names the action and `pedantic` (newer servers' fields, which 2.9 ignores): only
  // ever a create; `pedantic` is not passed on
  const action = (body as { action?: unknown }).action;
  if (action !== undefined && action !== '' && action !== 'create') {
    return { refused: `action ${JSON.stringify(action)}: a reader only creates consumers` };
  }
  const streamName = (body as { stream_name?: unknown }).stream_name;
  if (streamName !== undefined && streamName !== stream) {
    return { refused: `stream_name ${JSON.stringify(streamName)}: the subject names ${stream}` };
  }
  const config = (body as { config?: unknown }).config;
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    return { refused: 'config: a consumer create needs a config object' };
  }
  const rebuilt: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    const check = Object.hasOwn(FIELDS, key) ? FIELDS[key] : undefined;
    if (check === undefined) {
      return { refused: `config.${key}: not a field a reader's consumer may set` };
    }
    if (!check(value)) return { refused: `config.${key} ${JSON.stringify(value)}: not allowed` };
    rebuilt[key] = value;
  }
  const deliver = rebuilt.deliver_subject;
  if (deliver !== undefined && !isReaderInbox(deliver, inboxPrefixes)) {
    return {
      refused: `config.deliver_subject ${JSON.stringify(deliver)}: a reader's consumer delivers only into a reader's inbox (${inboxPrefixes.map((p) => `${p}.>`).join(', ')})`,
    };
  }
  const idle = rebuilt.inactive_threshold;
  if (
    idle !== undefined &&
    !((idle as number) > 0 && (idle as number) <= READER_CONSUMER_MAX_IDLE_NS)
  ) {
    return {
      refused: `config.inactive_threshold ${JSON.stringify(idle)}: at most ${READER_CONSUMER_MAX_IDLE_NS} ns (1 h)`,
    };
  }
  const name = subjectName ?? (typeof rebuilt.name === 'string' ? rebuilt.name : null);
  if (rebuilt.name !== undefined && rebuilt.name !== name) {
    return {
      refused: `config.name ${JSON.stringify(rebuilt.name)}: differs from the subject's ${JSON.stringify(name)}`,
    };
  }
  if (name !== null && !TOKEN.test(name)) {
    return { refused: `name ${JSON.stringify(name)} is not a consumer name` };
  }
  return {
    stream,
    name,
    body: { stream_name: stream, config: rebuilt, ...(action === 'create' && { action }) },
  };
}

function isReaderInbox(subject: unknown, prefixes: readonly string[]): boolean {
  if (typeof subject !== 'string') return false;
  if (!subject.split('.').every((t) => TOKEN.test(t))) return false;
  return prefixes.some((p) => subject.startsWith(`${p}.`));
}

export const isRefusal = (r: ReaderConsumerRequest | Refusal): r is Refusal => 'refused' in r;
