/**
 * Telling the backend's cancel broadcast from a forgery. The broadcast reaches a secure-mode
 * worker through the workers' account's import of the cancel subject, and NATS lets any
 * requester of that account name that subject as the reply of a JetStream request: the
 * server then delivers its answer there, to every worker. A compromised worker could so
 * broadcast a registry value it wrote (a direct get of its own key) or a dispatch message it
 * pulled, both of which parse as a cancel. The backend publishes a cancel bare: no reply
 * subject, no headers. A JetStream answer always carries one or the other (a delivery its ack
 * subject, a direct get its `Nats-Stream` headers, a status its code), so a cancel with either
 * is not the backend's and is ignored.
 */
import type { Msg } from '@nats-io/transport-node';
import { cancelControlSchema } from '../protocol.js';
import type { CancelControl } from '../protocol.js';

/** The cancel a broadcast message asks for, or null for a message that is not the backend's. */
export function cancelOf(msg: Pick<Msg, 'data' | 'reply' | 'headers'>): CancelControl | null {
  if (msg.reply) return null;
  if (msg.headers !== undefined) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(msg.data));
  } catch {
    return null;
  }
  const c = cancelControlSchema.safeParse(raw);
  return c.success ? c.data : null;
}
