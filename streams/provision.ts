import { JetStreamApiError, JetStreamApiCodes } from '@nats-io/jetstream';
import type { ConsumerConfig, JetStreamManager, StreamConfig } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import { nanos } from '@nats-io/transport-node';
import { TopologyConflictError } from './errors.js';
import type { Names } from './names.js';
import { DEDUPE_WINDOW_MS, dispatchConsumer, topology } from './topology.js';
import type { TopologyOptions } from './topology.js';

export type ChangeAction = 'created' | 'updated' | 'unchanged';

/** One line of what `ensureTopology` did; a second call returns only `unchanged`. */
export interface TopologyChange {
  kind: 'stream' | 'kv' | 'objectStore' | 'consumer';
  name: string;
  action: ChangeAction;
  settings?: string[];
  /** Why a setting was applied otherwise than asked (see {@link safeMaxBytes}). */
  note?: string;
}

/** Settings that cannot change in place: a difference is an error naming the setting. */
const FIXED_STREAM_SETTINGS = ['retention', 'storage', 'num_replicas'] as const;
/** Settings updated in place when they differ (a new pulse TTL, say). */
const MUTABLE_STREAM_SETTINGS = [
  'subjects',
  'duplicate_window',
  'max_age',
  'max_msgs_per_subject',
  'max_msgs',
  'allow_direct',
  'max_bytes',
  'discard',
  'allow_rollup_hdrs',
] as const;
const MUTABLE_CONSUMER_SETTINGS = ['ack_wait', 'max_deliver', 'max_ack_pending'] as const;
const FIXED_CONSUMER_SETTINGS = ['filter_subject', 'ack_policy', 'deliver_policy'] as const;

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

const isNotFound = (err: unknown): boolean =>
  err instanceof JetStreamApiError &&
  (err.code === JetStreamApiCodes.StreamNotFound ||
    err.code === JetStreamApiCodes.ConsumerNotFound);

async function streamInfoOrNull(jsm: JetStreamManager, name: string) {
  try {
    return await jsm.streams.info(name);
  } catch (err: unknown) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

async function ensureStream(
  jsm: JetStreamManager,
  want: Partial<StreamConfig> & { name: string },
  kind: TopologyChange['kind'] = 'stream',
  create?: () => Promise<unknown>,
): Promise<TopologyChange> {
  const info = await streamInfoOrNull(jsm, want.name);
  if (!info) {
    if (create) await create();
    else await jsm.streams.add(want);
    return { kind, name: want.name, action: 'created' };
  }
  const have = info.config as unknown as Record<string, unknown>;
  const wanted = { ...want } as Record<string, unknown>;
  let note: string | undefined;
  if (typeof wanted['max_bytes'] === 'number') {
    const safe = safeMaxBytes(wanted['max_bytes'], info.state.bytes);
    if (safe !== wanted['max_bytes']) {
      note = `max_bytes ${String(wanted['max_bytes'])} is below the ${info.state.bytes} bytes stored: set to ${safe} instead, since a lower bound would delete the oldest messages`;
      wanted['max_bytes'] = safe;
    }
  }
  for (const key of FIXED_STREAM_SETTINGS) {
    if (key in wanted && !same(have[key], wanted[key])) {
      throw new TopologyConflictError(`stream ${want.name}`, key, have[key], wanted[key]);
    }
  }
  const changed = MUTABLE_STREAM_SETTINGS.filter(
    (key) => key in wanted && !same(have[key], wanted[key]),
  );
  if (changed.length === 0) return { kind, name: want.name, action: 'unchanged' };
  const update = { ...info.config };
  for (const key of changed) (update as Record<string, unknown>)[key] = wanted[key];
  await jsm.streams.update(want.name, update);
  return { kind, name: want.name, action: 'updated', settings: changed, ...(note && { note }) };
}

/**
 * The `max_bytes` to apply to a stream that already holds `storedBytes`. nats-server enforces
 * a lowered bound at once by deleting the oldest messages, even with discard `new`: for the
 * event log that would be silent data loss. So a bound is never set below what is stored; it
 * goes to what is stored plus a tenth of the bound asked for (room for the tasks in flight),
 * and the log refuses new work until retention brings it under the bound asked for.
 */
export function safeMaxBytes(wantedMaxBytes: number, storedBytes: number): number {
  if (wantedMaxBytes <= 0 || storedBytes < wantedMaxBytes) return wantedMaxBytes;
  return storedBytes + Math.ceil(wantedMaxBytes / 10);
}

/** Creates or updates a durable consumer; idempotent, and safe from many backends at once. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  want: Partial<ConsumerConfig>,
): Promise<TopologyChange> {
  const name = want.durable_name!;
  let info;
  try {
    info = await jsm.consumers.info(stream, name);
  } catch (err: unknown) {
    if (!isNotFound(err)) throw err;
    // Two backends may race here; adding an identical consumer twice is accepted.
    await jsm.consumers.add(stream, want);
    return { kind: 'consumer', name: `${stream}/${name}`, action: 'created' };
  }
  const have = info.config as unknown as Record<string, unknown>;
  const wanted = want as Record<string, unknown>;
  for (const key of FIXED_CONSUMER_SETTINGS) {
    if (key in wanted && !same(have[key], wanted[key])) {
      throw new TopologyConflictError(`consumer ${stream}/${name}`, key, have[key], wanted[key]);
    }
  }
  const changed = MUTABLE_CONSUMER_SETTINGS.filter(
    (key) => key in wanted && !same(have[key], wanted[key]),
  );
  if (changed.length === 0)
    return { kind: 'consumer', name: `${stream}/${name}`, action: 'unchanged' };
  await jsm.consumers.update(stream, name, Object.fromEntries(changed.map((k) => [k, wanted[k]])));
  return { kind: 'consumer', name: `${stream}/${name}`, action: 'updated', settings: changed };
}

/** `dispatch_<tag>`, created by `join` and by the reconciler before it first publishes. */
export function ensureDispatchConsumer(
  jsm: JetStreamManager,
  n: Names,
  tag: string,
): Promise<TopologyChange> {
  return ensureConsumer(jsm, n.streams.dispatch, dispatchConsumer(n, tag));
}

/**
 * Makes the server hold DESIGN.md section 2: creates what is missing, updates mutable settings
 * that differ, and refuses (TopologyConflictError naming the setting) what cannot change in
 * place. Idempotent: the backend calls it at every start, and so do the tests.
 */
export async function ensureTopology(
  jsm: JetStreamManager,
  n: Names,
  opts: TopologyOptions,
): Promise<TopologyChange[]> {
  const t = topology(n, opts);
  const changes: TopologyChange[] = [];
  for (const s of t.streams) changes.push(await ensureStream(jsm, s as StreamConfig));
  const js = jsm.jetstream();
  const kvm = new Kvm(js);
  for (const kv of t.kv) {
    const want = {
      name: `KV_${kv.bucket}`,
      num_replicas: opts.replicas,
      max_age: nanos(kv.ttlMs),
      max_msgs_per_subject: kv.history,
      // The server caps the dedupe window at max_age; keep them consistent on a TTL change.
      duplicate_window: nanos(
        kv.ttlMs > 0 ? Math.min(kv.ttlMs, DEDUPE_WINDOW_MS) : DEDUPE_WINDOW_MS,
      ),
      allow_rollup_hdrs: kv.rollups,
    };
    changes.push(
      await ensureStream(jsm, want, 'kv', async () => {
        await kvm.create(kv.bucket, {
          ttl: kv.ttlMs,
          history: kv.history,
          replicas: opts.replicas,
        });
        // nats.js creates every bucket with rollups allowed.
        if (!kv.rollups) {
          const { config } = await jsm.streams.info(want.name);
          await jsm.streams.update(want.name, { ...config, allow_rollup_hdrs: false });
        }
      }),
    );
  }
  const objm = new Objm(js);
  for (const name of t.objectStores) {
    changes.push(
      await ensureStream(
        jsm,
        { name: `OBJ_${name}`, num_replicas: opts.replicas },
        'objectStore',
        () => objm.create(name, { replicas: opts.replicas }),
      ),
    );
  }
  for (const c of t.consumers) changes.push(await ensureConsumer(jsm, c.stream, c.config));
  return changes;
}
