/**
 * What a backend lets a reader (client, operator) create as a consumer, decided on the
 * request alone (docs/threat-model.md). A consumer's `deliver_subject` is a subject of the
 * application account, where the server pushes the stream's messages: aimed at a stream's
 * subject, it would write into that stream. A create that names a consumer already there
 * changes that consumer: another reader's, or one of the backend's. So a reader's consumer is
 * ephemeral, new, and delivers only into a reader's inbox (or is pulled).
 */

/** The longest a reader's consumer outlives its last use: a replay's pause, not a day. */
export const READER_CONSUMER_MAX_IDLE_NS = 60 * 60 * 1_000_000_000;

/** The consumer a create asks for: its stream, and its name when it names one. */
export interface ReaderConsumerRequest {
  stream: string;
  name: string | null;
}

/** A refusal, in words that name the field and the value. */
export interface Refusal {
  refused: string;
}

const TOKEN = /^[^\s.*>]+$/;

/**
 * Checks a reader's consumer create: `rest` is the create subject after `CONSUMER.CREATE.`
 * (`<stream>[.<name>[.<filter>]]`), `body` the JetStream create request. `inboxPrefixes` are
 * the readers' inbox prefixes (`_INBOX_R.client`, ...), where push consumers may deliver.
 */
export function checkReaderConsumer(
  rest: string,
  body: unknown,
  inboxPrefixes: readonly string[],
): ReaderConsumerRequest | Refusal {
  const [stream = '', subjectName] = rest.split('.');
  if (!TOKEN.test(stream))
    return { refused: `stream ${JSON.stringify(stream)} is not a stream name` };
  if (typeof body !== 'object' || body === null)
    return { refused: 'the request is not a JSON object' };
  const config = (body as { config?: unknown }).config;
  if (typeof config !== 'object' || config === null) {
    return { refused: 'config: a consumer create needs a config object' };
  }
  const c = config as Record<string, unknown>;
  if (c.durable_name !== undefined) {
    return {
      refused: `config.durable_name ${JSON.stringify(c.durable_name)}: a reader's consumer is ephemeral`,
    };
  }
  if (c.deliver_group !== undefined) {
    return {
      refused: `config.deliver_group ${JSON.stringify(c.deliver_group)}: not for a reader's consumer`,
    };
  }
  const deliver = c.deliver_subject;
  if (deliver !== undefined && !isReaderInbox(deliver, inboxPrefixes)) {
    return {
      refused: `config.deliver_subject ${JSON.stringify(deliver)}: a reader's consumer delivers only into a reader's inbox (${inboxPrefixes.map((p) => `${p}.>`).join(', ')})`,
    };
  }
  const idle = c.inactive_threshold;
  if (
    idle !== undefined &&
    !(typeof idle === 'number' && idle > 0 && idle <= READER_CONSUMER_MAX_IDLE_NS)
  ) {
    return {
      refused: `config.inactive_threshold ${JSON.stringify(idle)}: at most ${READER_CONSUMER_MAX_IDLE_NS} ns (1 h)`,
    };
  }
  const name = subjectName ?? (typeof c.name === 'string' ? c.name : null);
  if (c.name !== undefined && c.name !== name) {
    return {
      refused: `config.name ${JSON.stringify(c.name)}: differs from the subject's ${JSON.stringify(name)}`,
    };
  }
  if (name !== null && !TOKEN.test(name))
    return { refused: `name ${JSON.stringify(name)} is not a consumer name` };
  return { stream, name };
}

function isReaderInbox(subject: unknown, prefixes: readonly string[]): boolean {
  if (typeof subject !== 'string') return false;
  const tokens = subject.split('.');
  if (!tokens.every((t) => TOKEN.test(t))) return false;
  return prefixes.some((p) => subject.startsWith(`${p}.`));
}

export const isRefusal = (r: ReaderConsumerRequest | Refusal): r is Refusal => 'refused' in r;
