/**
 * Messages through nats-server by kind: a subscription on `>` from a connection of its own
 * sees each message once as it crosses the server (client publishes and the server's own:
 * API replies, pull deliveries, publish acks). Each is classified by its subject, by the
 * request it answers (requests are remembered by reply subject) or, for a JetStream
 * delivery, by the `$JS.ACK.<stream>.<consumer>` it carries. Each kind is weighed as
 * /varz counts it: a publish from a client is one message in; a message delivered to a
 * client is one out; a request from one client to another (a `sonar.api` verb) and its
 * reply are one in and one out each. This connection's own deliveries are left out of the
 * totals: the sampler subtracts `received`.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';

export interface TrafficCounter {
  /** Messages this connection received (to subtract from /varz). */
  received(): number;
  /** A copy of the weighted counts by kind so far. */
  snapshot(): Map<string, number>;
  stop(): Promise<void>;
}

export async function countTraffic(
  url: string,
  prefix: string,
  connect: (o: {
    servers: string;
    noAsyncTraces: boolean;
    name: string;
  }) => Promise<NatsConnection>,
): Promise<TrafficCounter> {
  const nc = await connect({ servers: url, noAsyncTraces: true, name: 'bench-traffic-counter' });
  const counts = new Map<string, number>();
  const add = (kind: string, w: number) => counts.set(kind, (counts.get(kind) ?? 0) + w);
  /** Reply subject -> [kind of the request, weight of each reply]. */
  const pending = new Map<string, [string, number]>();
  const api = `${prefix}.api.`;
  const jsApiPrefixes = ['$JS.API.', `${prefix}.js.API.`];
  let seen = 0;
  const sub: Subscription = nc.subscribe('>', {
    callback: (err, m) => {
      if (err) return;
      seen++;
      const s = m.subject;
      const reply = m.reply ?? '';
      // A JetStream delivery (pull or push): it names its stream and consumer.
      if (reply.startsWith('$JS.ACK.')) {
        const [, , stream, consumer] = reply.split('.');
        add(`delivery ${stream}/${consumer}`, 1);
        return;
      }
      const answered = pending.get(s);
      if (answered) {
        // A pull's inbox gets several deliveries (handled above) and status messages.
        if (!answered[0].startsWith('js pull')) pending.delete(s);
        add(`  reply to ${answered[0]}`, answered[1]);
        return;
      }
      if (s.startsWith('_INBOX') || s.startsWith('_INBOX_W')) {
        const status = m.headers?.code;
        add(status ? `status ${status} (inbox)` : 'inbox, unmatched', 1);
        return;
      }
      let kind: string;
      let weight = 1;
      let replyWeight = 1;
      const js = jsApiPrefixes.find((p) => s.startsWith(p));
      if (js) {
        const parts = s.slice(js.length).split('.');
        // CONSUMER.MSG.NEXT.<stream>.<consumer>, STREAM.INFO.<stream>, DIRECT.GET.<stream>...
        if (parts[0] === 'CONSUMER' && parts[1] === 'MSG' && parts[2] === 'NEXT') {
          kind = `js pull ${parts[3]}/${parts[4]}`;
        } else if (parts[0] === 'DIRECT') kind = `js DIRECT.GET ${parts[2]}`;
        else kind = `js ${parts[0]}.${parts[1]} ${parts[2] ?? ''}`.trimEnd();
        if (parts[0] === 'CONSUMER' && parts[1] === 'INFO') kind = `js CONSUMER.INFO ${parts[2]}`;
      } else if (s.startsWith('$JS.ACK.')) {
        const p = s.split('.');
        kind = `ack ${p[2]}/${p[3]}${reply ? ' (ackAck)' : ''}`;
      } else if (s.startsWith('$KV.')) {
        kind = `kv put ${s.split('.')[1]}`;
      } else if (s.startsWith('$O.')) {
        kind = `obj put ${s.split('.')[1]}`;
      } else if (s.startsWith(api)) {
        // A request from a client answered by another: in + out, each way.
        const verb = s.slice(api.length).split('.');
        kind = `sonar api ${verb[0] === 'w' ? verb.slice(2).join('.') : verb.join('.')}`;
        weight = 2;
        replyWeight = 2;
      } else if (s.startsWith(`${prefix}.events.`)) {
        kind = `event publish ${s.split('.')[2]}`;
      } else if (s.startsWith(`${prefix}.`)) {
        kind = `publish ${s.split('.')[1]}`;
      } else if (s.startsWith('$JS.EVENT.')) {
        // Advisories go out only to an interest: this subscription's own (no weight).
        kind = 'js advisory';
        weight = 0;
      } else kind = `other ${s.split('.').slice(0, 2).join('.')}`;
      if (reply) pending.set(reply, [kind, replyWeight]);
      add(kind, weight);
    },
  });
  await nc.flush();
  return {
    received: () => seen,
    snapshot: () => new Map(counts),
    stop: async () => {
      sub.unsubscribe();
      await nc.close();
    },
  };
}

/** Per unit: the counts of `after` less those of `before`, by kind. */
export function trafficDelta(
  before: Map<string, number>,
  after: Map<string, number>,
  units: number,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, n] of after) {
    const d = n - (before.get(k) ?? 0);
    if (d > 0) out.set(k, d / units);
  }
  return out;
}
