import type { KV } from '@nats-io/kv';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Projection } from '../../../actors/projection.js';
import type { Names } from '../../../streams/names.js';
import { registryEntrySchema } from '../../protocol.js';
import type { RegistryEntry } from '../../protocol.js';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { jetstreamOf } from '../../../streams/jetstream-api.js';

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
/** How long the first key listing may take before a fresh one is made (see `listKeys`). */
const LISTING_ATTEMPT_MS = 2_000;

export class Registry {
  private constructor(readonly kv: KV) {}

  static async open(nc: NatsConnection, n: Names): Promise<Registry> {
    return new Registry(await new Kvm(await jetstreamOf(nc, n)).open(n.buckets.workers));
  }

  /**
   * Every live entry, `pulseAt` = server time of its last pulse. Bad entries are skipped.
   * Rejects after `timeoutMs` rather than hang: the key listing rides an ordered consumer,
   * and a listing that never ends would stall the reconciler for good (a partial list is
   * never returned: a missing key would read as a dead worker).
   *
   * `expected` (the workers the log says are Active or Draining) are read one by one when
   * the listing missed them: a key is declared gone only when a direct read of it, answered
   * by the stream leader, finds nothing too. In the cluster chaos scenario a listing made
   * while a node rejoined came back without any key, and six live workers were declared Lost.
   */
  async live(expected: Iterable<string> = [], timeoutMs = 10_000): Promise<LiveEntry[]> {
    const deadline = performance.now() + timeoutMs;
    let listed: Set<string> | null = null;
    // Each try may take twice as long as the one before: a slow listing still ends.
    for (let boundMs = LISTING_ATTEMPT_MS; listed === null; boundMs *= 2) {
      const leftMs = deadline - performance.now();
      if (leftMs <= 0) {
        throw new SonarError(
          ErrorCode.Unavailable,
          `registry listing took more than ${timeoutMs} ms`,
          { timeoutMs },
        );
      }
      listed = await this.listKeys(Math.min(leftMs, boundMs));
    }
    const reads = [...listed].map((key) => this.read(key));
    for (const id of expected) if (!listed.has(id)) reads.push(this.read(id));
    const out = (await Promise.all(reads)).filter((e): e is LiveEntry => e !== null);
    out.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
    return out;
  }

  /**
   * One listing of the keys, or null when it did not end within `boundMs`. nats.js ends a
   * listing at the message that says nothing is pending after it, counting what is pending
   * when its consumer is made; a key that expires after that and before its delivery is
   * never delivered, and that listing would wait for good. A fresh listing counts afresh.
   */
  private async listKeys(boundMs: number): Promise<Set<string> | null> {
    const keys = await this.kv.keys();
    let stalled = false;
    const timer = setTimeout(() => {
      stalled = true;
      keys.stop();
    }, boundMs);
    const listed = new Set<string>();
    try {
      for await (const key of keys) listed.add(key);
    } finally {
      clearTimeout(timer);
    }
    return stalled ? null : listed;
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
