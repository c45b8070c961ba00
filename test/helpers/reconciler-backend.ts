/**
 * Fixtures for the reconciler's integration tests: a backend that runs only the
 * reconciler loop (no API handlers, no finalizers), short timings, events appended by hand,
 * and registry entries put into `sonar_workers` by hand (no worker processes).
 */
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { EventRecord } from '../../actors/projection.js';
import type { BackendContext } from '../../src/backend/context.js';
import { reconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import type { ReconcilerLoopOptions } from '../../src/backend/reconciler/reconciler-loop.js';
import type { Logger } from '../../src/log.js';
import type { ServerPerFile } from './server-per-file.js';
import { startBackend } from './test-backend.js';
import type { TestBackend } from './test-backend.js';

/** Seconds, not minutes: every judgement of DESIGN.md section 4 happens within a test. */
export const FAST_ENV = {
  SONAR_TICK: '200ms',
  SONAR_LOCK_TTL: '1s',
  SONAR_PULSE_INTERVAL: '300ms',
  SONAR_PULSE_TTL: '1s',
  SONAR_ORPHAN_AGE: '1500ms',
  SONAR_PUBLISH_TIMEOUT: '1500ms',
  SONAR_FINALIZE_LEASE: '1s',
} as const;

/**
 * A backend on `nc` and `prefix` whose one component is the reconciler loop (reach it with
 * `component(ReconcilerLoop)`): no API, no outputs, {@link FAST_ENV} timings.
 */
export const startReconcilerBackend = (
  url: string,
  nc: NatsConnection,
  prefix: string,
  o: {
    env?: Record<string, string>;
    nodeId?: string;
    loop?: ReconcilerLoopOptions;
    log?: Logger;
  } = {},
): Promise<TestBackend> =>
  startBackend({
    url,
    nc,
    prefix,
    env: { ...FAST_ENV, ...o.env },
    nodeId: o.nodeId,
    log: o.log,
    stopTimeoutMs: 2_000,
    components: [reconcilerLoop(o.loop)],
    handlers: 'none',
    outputs: 'none',
  });

/** `sonar_workers` of `prefix`, to put registry entries by hand. */
export async function workersBucket(nc: NatsConnection, prefix: string): Promise<KV> {
  return new Kvm(nc).open(`${prefix}_workers`);
}

/** What a reconciler test file starts on its server (serverPerFile), by prefix. */
export interface ReconcilerBackends {
  /** A reconciler backend on `prefix`, on the file's connection unless given `nc`. */
  start(
    prefix: string,
    o?: Parameters<typeof startReconcilerBackend>[3],
    nc?: NatsConnection,
  ): Promise<TestBackend>;
  /** The workers bucket of `prefix`, to put pulses in. */
  workers(prefix: string, nc?: NatsConnection): Promise<KV>;
}

/** {@link startReconcilerBackend} and {@link workersBucket} on the file's server. */
export const reconcilerBackendsOn = (nats: ServerPerFile): ReconcilerBackends => ({
  start: (prefix, o = {}, nc = nats.nc) => startReconcilerBackend(nats.server.url, nc, prefix, o),
  workers: (prefix, nc = nats.nc) => workersBucket(nc, prefix),
});

/** Puts a registry entry (DESIGN.md section 4) as a worker's pulse would. */
export async function pulse(
  kv: KV,
  workerId: string,
  over: Partial<{ tags: string[]; slots: number; active: boolean; running: string[] }> = {},
): Promise<void> {
  await kv.put(
    workerId,
    JSON.stringify({
      workerId,
      host: 'test',
      tags: ['linux'],
      slots: 2,
      active: true,
      pulseAt: new Date().toISOString(),
      running: [],
      ...over,
    }),
  );
}

/** Every stored event of `subject` (a wildcard is fine) of the given types. */
export async function eventsOfType(
  ctx: BackendContext,
  subject: string,
  ...types: string[]
): Promise<EventRecord[]> {
  const all = await ctx.store.readAggregate(subject);
  return all.filter((r) => types.includes(String(r.type)));
}
