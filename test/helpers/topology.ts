import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { nuid } from '@nats-io/transport-node';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
import type { TopologyOptions } from '../../streams/topology.js';

/** A fresh prefix per test (`t<nuid>`), like BullMQ's random queue names. */
export const freshPrefix = (): string => `t${nuid.next().toLowerCase().slice(-10)}`;

/** Provisions a fresh topology on `nc` and returns its names. */
export async function freshTopology(
  nc: NatsConnection,
  opts: Partial<TopologyOptions> = {},
): Promise<Names> {
  const n = names(freshPrefix());
  await ensureTopology(await jetstreamManager(nc), n, { ...DEFAULT_TOPOLOGY_OPTIONS, ...opts });
  return n;
}

/** An event store on a fresh topology of `nc`, and that topology's names. */
export async function freshStore(nc: NatsConnection): Promise<{ n: Names; store: EventStore }> {
  const n = await freshTopology(nc);
  return { n, store: new EventStore(nc, n) };
}
