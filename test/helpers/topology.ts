import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { randomBytes } from 'node:crypto';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
import type { TopologyOptions } from '../../streams/topology.js';

/** Random per test process: a file's tests share one process and, often, one server. */
const processPart = randomBytes(5).toString('hex');
let made = 0;

/**
 * A fresh prefix per test (`t<random><count>`), like BullMQ's random queue names. Counted
 * within the process, so no two tests of a file ever meet on one server's streams (a
 * lowercased nuid tail could: its letters differ only in case, and a test that met an
 * earlier test's stream would replay that test's events as its own).
 */
export const freshPrefix = (): string => `t${processPart}${(++made).toString(36)}`;

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
