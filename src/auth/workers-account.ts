/**
 * The workers' account and its bridge to the application account (docs/threat-model.md).
 *
 * NATS checks a request's subject against the sender's permissions but never its reply
 * subject, and JetStream (or a backend) answers on whatever reply subject a request names.
 * A credential in the account that holds the streams could therefore make the server write
 * its answer anywhere in that account: into a registry key, the leader lock, an event
 * subject. Workers, their bootstrap credential and the supervisor run on the least trusted
 * hosts, so they live in an account of their own with no JetStream and no streams, and reach
 * the application account only through the service imports below. A service import replaces
 * the reply subject with one the server makes up (`_R_...`) and routes the answer back into
 * the workers' account: whatever a worker names as its reply, the answer lands where nothing
 * is stored.
 *
 * Each import names exactly one verb or one stream's API, never `$JS.API.>`; the users'
 * permissions (permissions.ts) then narrow each worker to its own subjects.
 *
 * What an answer routed back does land on is any subject of the workers' account, the
 * imports' own included. An answer sent onto an import whose local subject is mapped and ends
 * in `*` crashes nats-server 2.9 (a panic in its subject transform, fixed upstream later), so
 * every mapped import ends in `>`: the permissions, not the import, narrow a worker to its own
 * key and consumer. An answer sent onto a verb import reaches the backend with no reply, which
 * it ignores (api-service.ts); one sent onto the cancel broadcast is told apart by the worker
 * (cancel-control.ts).
 */
import type { Export, Import } from '@nats-io/jwt';
import type { Names } from '../../streams/names.js';

/** One subject the application account serves to the workers' account. */
export interface Bridge {
  subject: string;
  /**
   * `service`: requests in, answers back (with a reply subject of the server's making).
   * `stream`: messages published in the application account, delivered to the workers'.
   */
  type: 'service' | 'stream';
  /** A pull request is answered by many messages, not one. */
  responseType?: 'Stream';
  /**
   * The subject in the workers' account, when not `subject`. JetStream API subjects move
   * under the workers' own API prefix: an account without JetStream still answers
   * `$JS.API.>` itself ("JetStream not enabled"), ahead of any import there.
   */
  local?: string;
}

const kvStream = (bucket: string): string => `KV_${bucket}`;

/**
 * A pull stays open up to the worker's pull expiry; the answers of a request are routed back
 * for this long after it. Generous, so a long pull on a slow link still gets its messages.
 */
const PULL_RESPONSE_THRESHOLD_NS = 5 * 60 * 1_000_000_000;

/** Everything the workers' account may reach in the application account. */
export function workerBridges(n: Names): Bridge[] {
  const workersKv = kvStream(n.buckets.workers);
  const dispatch = n.streams.dispatch;
  const api = (rest: string): Bridge => ({
    subject: `$JS.API.${rest}`,
    type: 'service',
    local: `${n.subjects.workerJsApi}.${rest}`,
  });
  return [
    // the backend's verbs: enroll (bootstrap), exited (supervisor), a worker's own verbs
    { subject: n.subjects.api('enroll'), type: 'service' },
    { subject: n.subjects.api('exited'), type: 'service' },
    { subject: `${n.prefix}.api.w.*.>`, type: 'service' },
    // the pulse: the worker's own registry key, written and read back
    // (nats.js writes a KV under the API prefix when it has one: `<apiPrefix>.$KV...`)
    {
      subject: `$KV.${n.buckets.workers}.>`,
      type: 'service',
      local: `${n.subjects.workerJsApi}.$KV.${n.buckets.workers}.>`,
    },
    api(`DIRECT.GET.${workersKv}.>`),
    api(`STREAM.INFO.${workersKv}`),
    // dispatch: pulls made by a backend (its messages relayed, then an end), and acks
    { subject: `${n.subjects.pull('*')}.*`, type: 'service', responseType: 'Stream' },
    { subject: `$JS.ACK.${dispatch}.>`, type: 'service' },
    // staged outputs
    { subject: `${n.prefix}.stage.*.>`, type: 'service' },
    api(`STREAM.INFO.${n.streams.staging}`),
    // cancellations, broadcast by the backend
    { subject: n.subjects.controlCancel, type: 'stream' },
  ];
}

/**
 * The application account's exports: the bridges of both other accounts, each subject once
 * (an account whose exports overlap is refused by the server).
 */
export function bridgeExports(bridges: Bridge[]): Export[] {
  const bySubject = new Map<string, Bridge>();
  for (const b of bridges) if (!bySubject.has(b.subject)) bySubject.set(b.subject, b);
  return [...bySubject.values()].map((b) => ({
    name: b.subject,
    subject: b.subject,
    type: b.type,
    ...(b.responseType !== undefined && {
      response_type: b.responseType,
      response_threshold: PULL_RESPONSE_THRESHOLD_NS,
    }),
  }));
}

/** An account's imports of its bridges from the application account. */
export function bridgeImports(bridges: Bridge[], applicationAccount: string): Import[] {
  return bridges.map((b) => ({
    name: b.subject,
    subject: b.subject,
    account: applicationAccount,
    type: b.type,
    ...(b.local !== undefined && { local_subject: b.local }),
  }));
}
