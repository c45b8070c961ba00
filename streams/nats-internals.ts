import type { Socket } from 'node:net';
import type { NatsConnection } from '@nats-io/transport-node';
import transportPackage from '@nats-io/transport-node/package.json' with { type: 'json' };
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
