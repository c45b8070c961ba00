/**
 * What the server lets a connection do, probed for real: a publish or a subscription is
 * either allowed or refused with a permissions violation. Shared by the credential and the
 * access-control tests.
 */
import type { NatsConnection } from '@nats-io/transport-node';

/**
 * What a request to `subject` meets: `allowed` when the publish went through (no one
 * answers here: no responders; or, across a service import to an account where no one
 * listens, no answer at all), `denied` on a permissions violation.
 */
export async function publishOutcome(nc: NatsConnection, subject: string): Promise<string> {
  try {
    await nc.request(subject, '{}', { timeout: 2_000 });
    return 'allowed';
  } catch (err: unknown) {
    const text = String((err as Error).message);
    if (/permissions violation/i.test(text)) return 'denied';
    if (/no responders|timeout/i.test(text)) return 'allowed';
    throw err;
  }
}

/** `denied` when the server refuses the subscription. */
export async function subscribeOutcome(nc: NatsConnection, subject: string): Promise<string> {
  const sub = nc.subscribe(subject);
  const closed = sub.closed.then((e) => (e instanceof Error ? e.message : 'closed'));
  await nc.flush();
  const first = await Promise.race([closed, nc.flush().then(() => 'open')]);
  sub.unsubscribe();
  return /permissions violation/i.test(first) ? 'denied' : first === 'open' ? 'allowed' : first;
}
