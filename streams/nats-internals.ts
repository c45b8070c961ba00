import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { NatsConnection } from '@nats-io/transport-node';
import transportPackage from '@nats-io/transport-node/package.json' with { type: 'json' };
import { ErrorCode, SonarError } from '../actors/errors.js';
import { assertTestedVersion } from '../actors/tested-version.js';

/**
 * Every read or patch of nats.js's private fields, in one place: another minor release may
 * move them, so loading this module with one refuses to start (package.json pins the tested
 * minor). transport-node pins nats-core, where the fields live, to its own version.
 */
export const NATS_JS_TESTED = '3.4';
assertTestedVersion('@nats-io/transport-node', transportPackage.version, NATS_JS_TESTED);

/** The connection's inbox prefix (`inboxPrefix` option, for accounts that restrict `_INBOX`). */
export function inboxPrefixOf(nc: NatsConnection): string {
  return (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix ?? '';
}

/** The slice of nats.js internals this module touches (transport-node 3.4). */
interface TransportLike {
  socket?: Socket;
  send(frame: Uint8Array): void;
}

/**
 * Makes a connection send what it writes in one event-loop turn as one socket write.
 *
 * Why: nats.js flushes its outbound buffer from a microtask queued by the first command after
 * a flush, so in a process where many requests continue in separate promise chains (the
 * backend, a busy worker), nearly every publish, reply and ack goes out in a write(2) of its
 * own, and wakes nats-server once each. The e2e bench profile (bench/e2e.ts --prof) had the
 * backend spend about a quarter of its CPU in writeBuffer. Corking the socket at the first
 * send of a turn and uncorking it in setImmediate (after every microtask of the turn) sends
 * the same bytes, in the same order, in one writev; a turn's latency at most.
 *
 * nats.js replaces the transport on each reconnect, so the protocol handler's `transport`
 * property is wrapped to patch every transport it is given. When the internals do not look
 * as expected, this does nothing and returns false: writes are merely not coalesced.
 */
export function coalesceWrites(nc: NatsConnection): boolean {
  const protocol = (nc as unknown as { protocol?: { transport?: TransportLike } }).protocol;
  if (!protocol || typeof protocol.transport?.send !== 'function') return false;
  let current = patch(protocol.transport);
  Object.defineProperty(protocol, 'transport', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (t: TransportLike) => {
      current = patch(t);
    },
  });
  return true;
}

const patched = new WeakSet<TransportLike>();

function patch(t: TransportLike): TransportLike {
  if (patched.has(t) || typeof t.send !== 'function') return t;
  patched.add(t);
  const send = t.send.bind(t);
  let corked: Socket | null = null;
  t.send = (frame) => {
    const socket = t.socket;
    if (socket && corked === null && !socket.destroyed) {
      socket.cork();
      corked = socket;
      setImmediate(() => {
        corked = null;
        // end() and destroy() uncork by themselves; uncorking a closed socket is a no-op.
        socket.uncork();
      });
    }
    send(frame);
  };
  return t;
}

const settled = Symbol('sonar: request settled');

/** The slice of nats-core's `RequestOne` (one request's pending answer) this module touches. */
interface RequestOneLike {
  resolver: (this: RequestOneLike, err: Error | null, msg: unknown) => void;
  cancel: (this: RequestOneLike, err?: Error) => void;
  timer?: { cancel(): void };
  mux: { cancel(r: RequestOneLike): void };
  [settled]?: boolean;
}

let settledRequestsPatched: boolean | null = null;

/**
 * Makes a request that got its answer (or its error) stop building an Error nobody sees.
 *
 * Why: nats.js ends every request through `cancel()`, which rejects the request's promise with
 * a new `RequestError("cancelled")`, its stack captured. After the answer resolved that
 * promise the rejection is a no-op, but the Error is still built, once per JetStream publish,
 * KV put and API request: in the e2e bench profile (bench/e2e.ts --prof) it was the
 * backend's largest JavaScript function by self time (docs/benchmarks.md). So a `cancel()`
 * that comes after the resolver settled the promise does everything else it did (stop the
 * timer, leave the request map) and skips the Error; any other `cancel()` is unchanged.
 *
 * The class is loaded as transport-node loads it, so that the copy patched is the one the
 * connections use. It patches the class, for every connection of the process, once; when the
 * internals do not look as expected it does nothing and returns false.
 */
export function skipSettledRequestErrors(): boolean {
  if (settledRequestsPatched !== null) return settledRequestsPatched;
  settledRequestsPatched = false;
  let proto: RequestOneLike;
  try {
    const fromTransport = createRequire(
      createRequire(import.meta.url).resolve('@nats-io/transport-node'),
    );
    const core = fromTransport('@nats-io/nats-core/internal') as {
      RequestOne?: { prototype: RequestOneLike };
    };
    proto = core.RequestOne!.prototype;
  } catch (_err: unknown) {
    return false;
  }
  if (typeof proto.resolver !== 'function' || typeof proto.cancel !== 'function') return false;
  const resolver = proto.resolver;
  const cancel = proto.cancel;
  proto.resolver = function (this: RequestOneLike, err, msg) {
    // Its promise is settled by the time the resolver calls cancel().
    this[settled] = true;
    resolver.call(this, err, msg);
  };
  proto.cancel = function (this: RequestOneLike, err?: Error) {
    if (err !== undefined || this[settled] !== true) return cancel.call(this, err);
    this.timer?.cancel();
    this.mux.cancel(this);
  };
  settledRequestsPatched = true;
  return true;
}

/**
 * A JetStream message's ack subject: the reply subject it was delivered with. nats.js 3.4
 * keeps it on the message object (`JsMsgImpl.reply`) but leaves it out of the `JsMsg` type.
 */
export function ackSubjectOf(m: object): string {
  const reply = (m as { reply?: unknown }).reply;
  if (typeof reply !== 'string' || !reply.startsWith('$JS.ACK.')) {
    throw new SonarError(
      ErrorCode.Decode,
      'a JetStream message without its ack subject: nats.js internals changed',
    );
  }
  return reply;
}
