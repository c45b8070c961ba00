import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Projection } from '../../actors/projection.js';
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
  private constructor(
    readonly kv: KV,
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly keyPrefix: string,
  ) {}

  static async open(nc: NatsConnection, n: Names, timeoutMs = 10_000): Promise<Registry> {
    const bucket = n.buckets.workers;
    return new Registry(
      await new Kvm(nc).open(bucket),
      await jetstreamManager(nc, { timeout: timeoutMs }),
      `KV_${bucket}`,
      `$KV.${bucket}.`,
    );
  }

  /**
   * Every live entry, `pulseAt` = server time of its last pulse. Bad entries are skipped.
   *
   * The keys come from the stream's own subject list (one STREAM.INFO request, paged by the
   * server), not from nats.js `kv.keys()`: that listing rides an ordered consumer that ends
   * only on a message whose pending count is 0, and a key that expires between the
   * consumer's creation and its delivery leaves it waiting for an idle heartbeat. With
   * short pulse TTLs that stalled the reconciler for 10 s at a time. A failed request
   * rejects; a partial list is never returned (a missing key would read as a dead worker).
   *
   * `expected` (the workers the log says are Active or Draining) are read one by one when
   * the listing missed them: a key is declared gone only when a direct read of it, answered
   * by the stream leader, finds nothing too. In the cluster chaos scenario a listing made
   * while a node rejoined came back without any key, and six live workers were declared Lost.
   */
  async live(expected: Iterable<string> = []): Promise<LiveEntry[]> {
    const info = await this.jsm.streams.info(this.stream, {
      subjects_filter: `${this.keyPrefix}>`,
    });
    const listed = new Set(
      Object.keys(info.state.subjects ?? {}).map((s) => s.slice(this.keyPrefix.length)),
    );
    const reads: Promise<LiveEntry | null>[] = [...listed].map((key) => this.read(key));
    for (const id of expected) if (!listed.has(id)) reads.push(this.read(id));
    const out = (await Promise.all(reads)).filter((e): e is LiveEntry => e !== null);
    out.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
    return out;
  }

  /** One key's entry, or null when it is gone, deleted or unreadable. */
  private async read(key: string): Promise<LiveEntry | null> {
    const e = await this.kv.get(key);
    if (!e || e.operation !== 'PUT') return null;
    let raw: unknown;
    try {
      raw = e.json();
    } catch {
      return null;
    }
    const parsed = registryEntrySchema.safeParse(raw);
    // The key is whose entry it is: in secure mode a worker may write its own key only, so
    // a value naming another worker is a forgery, never that worker's pulse.
    if (!parsed.success || parsed.data.workerId !== key) return null;
    return { ...parsed.data, pulseAt: e.created.toISOString() };
  }

  async remove(workerId: string): Promise<void> {
    await this.kv.delete(workerId);
  }
}

/** Workers the log says are Active or Draining: the registry must account for each. */
export function workersInService(p: Projection): Iterable<string> {
  return p.workersInService;
}
