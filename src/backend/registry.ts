import type { KV } from '@nats-io/kv';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';
import { registryEntrySchema } from '../protocol.js';
import type { RegistryEntry } from '../protocol.js';

/**
 * A live registry entry as the backend sees it: the worker's own fields, with `pulseAt`
 * replaced by the KV entry's server timestamp (DESIGN.md section 4: recency is judged by the
 * server's clock, never the worker's).
 */
export type LiveEntry = RegistryEntry;

/**
 * Reads `sonar_workers`. On 2.9 a watcher sees nothing when a key expires by TTL, so the
 * reconciler reads the whole bucket every tick: a key that is there is live.
 */
export class Registry {
  private constructor(readonly kv: KV) {}

  static async open(nc: NatsConnection, n: Names): Promise<Registry> {
    return new Registry(await new Kvm(nc).open(n.buckets.workers));
  }

  /**
   * Every live entry, `pulseAt` = server time of its last pulse. Bad entries are skipped.
   * Rejects after `timeoutMs` rather than hang: the key listing rides an ordered consumer,
   * and a listing that never ends would stall the reconciler for good (a partial list is
   * never returned: a missing key would read as a dead worker).
   */
  async live(timeoutMs = 10_000): Promise<LiveEntry[]> {
    const out: LiveEntry[] = [];
    const keys = await this.kv.keys();
    const timer = setTimeout(
      () => keys.stop(new Error(`registry listing took more than ${timeoutMs} ms`)),
      timeoutMs,
    );
    const pending: Promise<void>[] = [];
    try {
      await this.list(keys, pending, out);
    } finally {
      clearTimeout(timer);
    }
    await Promise.all(pending);
    out.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
    return out;
  }

  private async list(
    keys: AsyncIterable<string>,
    pending: Promise<void>[],
    out: LiveEntry[],
  ): Promise<void> {
    for await (const key of keys) {
      pending.push(
        this.kv.get(key).then((e) => {
          if (!e || e.operation !== 'PUT') return;
          let raw: unknown;
          try {
            raw = e.json();
          } catch {
            return;
          }
          const parsed = registryEntrySchema.safeParse(raw);
          if (parsed.success) out.push({ ...parsed.data, pulseAt: e.created.toISOString() });
        }),
      );
    }
  }

  async remove(workerId: string): Promise<void> {
    await this.kv.delete(workerId);
  }
}
