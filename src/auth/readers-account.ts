/**
 * The readers' account: clients and operators (docs/threat-model.md).
 *
 * A reader in the account that holds the streams could make the server write there: the
 * reply subject of a JetStream request is never checked, and the body of a consumer create
 * names a `deliver_subject` the server then pushes a stream's messages onto. So readers live
 * in an account of their own, with no JetStream and no streams, like the workers (see
 * workers-account.ts for how an import routes answers back), and reach the application account
 * through the bridges below:
 * - each JetStream read they need (readerJsNeeds), imported one by one under the readers' API
 *   prefix, an answer to which lands back in the readers' account;
 * - a consumer create, served by the backends (`<prefix>.reader.consumer.>`), which refuse a
 *   durable consumer, a name already in use, and any `deliver_subject` outside the readers'
 *   inboxes (reader-consumers.ts);
 * - the readers' inboxes as a stream from the application account, where push consumers
 *   deliver, and flow control back;
 * - their API verbs.
 */
import {
  readerJsNeeds,
  readerLocalSubject,
  readerVerbs,
  roleInboxPrefix,
  READER_ROLES,
} from './permissions.js';
import type { Bridge } from './workers-account.js';
import type { Names } from '../../streams/names.js';

const CONSUMER_CREATE = '$JS.API.CONSUMER.CREATE';

/** The subject a backend serves a reader's consumer create on, for a `$JS.API` subject. */
function consumerCreateSubject(n: Names, jsApiSubject: string): string {
  return `${n.subjects.readerConsumerCreate}${jsApiSubject.slice(CONSUMER_CREATE.length)}`;
}

/** Everything the readers' account may reach in the application account. */
export function readerBridges(n: Names): Bridge[] {
  const needs = new Set(READER_ROLES.flatMap((role) => readerJsNeeds(n)[role]));
  const verbs = new Set(READER_ROLES.flatMap((role) => readerVerbs(n)[role]));
  const bridges: Bridge[] = [];
  for (const need of needs) {
    const local = readerLocalSubject(n, need);
    if (need.startsWith(`${CONSUMER_CREATE}.`)) {
      bridges.push({ subject: consumerCreateSubject(n, need), type: 'service', local });
    } else if (need.startsWith('$JS.API.CONSUMER.MSG.NEXT.')) {
      bridges.push({ subject: need, type: 'service', local, responseType: 'Stream' });
    } else {
      bridges.push({ subject: need, type: 'service', local });
    }
  }
  for (const verb of verbs) {
    // a sweep answers with progress first, then its answer: many messages
    const streamed = verb === n.subjects.api('sweep');
    bridges.push({
      subject: verb,
      type: 'service',
      ...(streamed && { responseType: 'Stream' as const }),
    });
  }
  bridges.push(
    // flow control of the push consumers that deliver into the readers' inboxes
    { subject: '$JS.FC.>', type: 'service' },
    ...READER_ROLES.map((role): Bridge => ({
      subject: `${roleInboxPrefix(role)}.>`,
      type: 'stream',
    })),
  );
  return bridges;
}
