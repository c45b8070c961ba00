/**
 * The durability check a backend runs at start, after provisioning: is the event log
 * stored the way a production install needs?
 *
 * - Replicas: on a cluster every Sonar stream and bucket should keep 3 copies (writes then
 *   need a quorum of 2 and survive the loss of any one node). Fewer is a warning, or a refusal
 *   to start with `--strict-durability` (`SONAR_STRICT_DURABILITY=1`). A single server has no
 *   replication to check; its durability is its one disk (docs/operations.md, "Durability").
 * - fsync: servers 2.10 and later have `sync_interval` (default 2 min: an acknowledged write
 *   may sit in the page cache that long). Unless it is `always`, a power loss on a quorum of
 *   nodes at once can lose acknowledged writes (Jepsen's NATS 2.12 analysis, December 2025).
 *   The setting is readable only with a system-account credential (`$SYS...VARZ`); when it
 *   cannot be read the backend says so. 2.9 has no such setting (it syncs every 2 min).
 *
 * The judgement is a pure function of the facts, so every combination is unit-tested without
 * servers we cannot run here (2.10+).
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import type { Names } from '../../../streams/names.js';
import type { Logger } from '../../log.js';

/** What the check looks at. */
export interface DurabilityFacts {
  /** The connected server's cluster name; undefined on a single server. */
  cluster?: string | undefined;
  /** The connected server's version, e.g. `2.9.10`. */
  serverVersion: string;
  /** Every Sonar stream (KV buckets and object stores included) and its replica count. */
  streams: { name: string; replicas: number }[];
  /** The server's fsync setting when it could be read (2.10+, system account), else null. */
  sync: { always: boolean; intervalMs: number | null } | null;
}

export interface DurabilityVerdict {
  /** Problems to log as warnings. */
  warnings: string[];
  /** Problems that stop the backend (only with strict). */
  refusals: string[];
  /** Facts worth one info line (a single server, a 2.9 server). */
  notes: string[];
}

/** The backend refused to start: the log would not be stored durably enough. */
export class DurabilityError extends SonarError {
  override readonly name = 'DurabilityError';
  constructor(readonly problems: string[]) {
    super(
      ErrorCode.Unavailable,
      `refusing to start (--strict-durability): ${problems.join('; ')}`,
      { problems },
    );
  }
}

/** Writes on a cluster need this many copies to survive the loss of one node. */
export const MIN_CLUSTER_REPLICAS = 3;

/** `[major, minor, patch]` of a server version (`2.10.22-RC.1` -> [2, 10, 22]). */
function versionOf(v: string): [number, number, number] {
  const [major = 0, minor = 0, patch = 0] = v.split(/[.-]/).map((p) => Number.parseInt(p, 10));
  return [major || 0, minor || 0, patch || 0];
}

const hasSyncInterval = (v: string): boolean => {
  const [major, minor] = versionOf(v);
  return major > 2 || (major === 2 && minor >= 10);
};

/** The verdict on `facts`; with `strict`, every known problem is a refusal too. */
export function judgeDurability(facts: DurabilityFacts, strict: boolean): DurabilityVerdict {
  const problems: string[] = [];
  const warnings: string[] = [];
  const notes: string[] = [];
  if (facts.cluster !== undefined) {
    const few = facts.streams.filter((s) => s.replicas < MIN_CLUSTER_REPLICAS);
    if (few.length > 0) {
      const list = few.map((s) => `${s.name} (${s.replicas})`).join(', ');
      problems.push(
        `on cluster ${facts.cluster}, ${few.length} stream(s) keep fewer than ` +
          `${MIN_CLUSTER_REPLICAS} replicas: ${list}; losing one node can lose acknowledged ` +
          `events (new installs: SONAR_REPLICAS=3; existing streams: raise num_replicas)`,
      );
    }
  } else {
    notes.push('single server: no replication, the event log is as durable as its one disk');
  }
  if (!hasSyncInterval(facts.serverVersion)) {
    notes.push(
      `nats-server ${facts.serverVersion} has no sync_interval setting (2.10+): it fsyncs ` +
        'every 2 min, so a power loss can drop writes acknowledged since the last sync',
    );
  } else if (facts.sync === null) {
    warnings.push(
      `cannot read sync_interval from nats-server ${facts.serverVersion} (needs a ` +
        'system-account credential): make sure it is `always` (deploy/nats/server-2.10.conf)',
    );
  } else if (!facts.sync.always) {
    const every =
      facts.sync.intervalMs === null ? 'the default 2 min' : `${facts.sync.intervalMs} ms`;
    problems.push(
      `sync_interval is ${every}, not \`always\`: a power loss on a quorum of nodes can lose ` +
        'acknowledged writes (deploy/nats/server-2.10.conf)',
    );
  }
  return strict
    ? { warnings, refusals: problems, notes }
    : { warnings: [...problems, ...warnings], refusals: [], notes };
}

/** Every stream of this prefix's topology: its own, and its KV and object-store streams. */
function ownsStream(n: Names, stream: string): boolean {
  const own: string[] = Object.values(n.streams);
  const buckets = Object.values(n.buckets).map((b) => `KV_${b}`);
  const stores = Object.values(n.objectStores).map((o) => `OBJ_${o}`);
  return own.includes(stream) || buckets.includes(stream) || stores.includes(stream);
}

/**
 * The server's fsync setting from `$SYS.REQ.SERVER.<id>.VARZ`; null when the credential may
 * not ask (the usual case: backends are not system users) or the server does not answer.
 */
async function readSync(nc: NatsConnection): Promise<DurabilityFacts['sync']> {
  const id = nc.info?.server_id;
  if (id === undefined) return null;
  try {
    const m = await nc.request(`$SYS.REQ.SERVER.${id}.VARZ`, '{}', { timeout: 1_000 });
    const varz = m.json<{
      data?: { jetstream?: { config?: { sync_always?: boolean; sync_interval?: number } } };
    }>();
    const config = varz.data?.jetstream?.config;
    if (config === undefined) return null;
    const ns = config.sync_interval;
    return { always: config.sync_always === true, intervalMs: ns ? Math.round(ns / 1e6) : null };
  } catch (_err: unknown) {
    return null;
  }
}

/** Reads the facts: the connected server's info and every Sonar stream's replica count. */
export async function readDurabilityFacts(
  nc: NatsConnection,
  jsm: JetStreamManager,
  n: Names,
): Promise<DurabilityFacts> {
  const streams: DurabilityFacts['streams'] = [];
  let cluster = nc.info?.cluster;
  for await (const s of jsm.streams.list()) {
    if (!ownsStream(n, s.config.name)) continue;
    streams.push({ name: s.config.name, replicas: s.config.num_replicas });
    // A clustered stream names its cluster even when the INFO of the server we reached did not.
    cluster ??= s.cluster?.name;
  }
  streams.sort((a, b) => a.name.localeCompare(b.name));
  return {
    cluster,
    serverVersion: nc.info?.version ?? '0.0.0',
    streams,
    sync: hasSyncInterval(nc.info?.version ?? '0.0.0') ? await readSync(nc) : null,
  };
}

/**
 * Runs the check and logs its verdict.
 * @throws DurabilityError with `strictDurability` when a known problem was found.
 */
export async function checkDurability(
  nc: NatsConnection,
  jsm: JetStreamManager,
  n: Names,
  opts: { strictDurability?: boolean | undefined; log: Logger },
): Promise<DurabilityVerdict> {
  const facts = await readDurabilityFacts(nc, jsm, n);
  const verdict = judgeDurability(facts, opts.strictDurability === true);
  const log = opts.log.child({ component: 'durability' });
  for (const note of verdict.notes) log.info(note);
  for (const warning of verdict.warnings) log.warn(warning);
  if (verdict.refusals.length > 0) throw new DurabilityError(verdict.refusals);
  return verdict;
}
