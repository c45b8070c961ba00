import { isWrongLastSequence } from '../../../streams/errors.js';
import type { KV } from '@nats-io/kv';
import type { ClockSample } from './server-clock.js';

/** The key of the reconciler's lock in `sonar_locks` (DESIGN.md section 2). */
export const RECONCILER_LOCK = 'reconciler';

export interface LeaderLockOptions {
  /** The `sonar_locks` bucket; its TTL (`SONAR_LOCK_TTL`) releases a lock nobody renews. */
  kv: KV;
  /** This backend's id, stored as the lock's value. */
  nodeId: string;
  /** The bucket TTL: a lock not renewed for this long is gone. */
  lockTtlMs: number;
  /** How often the holder renews (`SONAR_TICK`). */
  tickMs: number;
  /** @defaultValue {@link RECONCILER_LOCK} */
  key?: string;
  /**
   * A monotonic clock for the lease (wall-clock jumps must not extend it).
   * @defaultValue `performance.now`
   */
  monotonic?: () => number;
  /**
   * The wall clock the server-offset samples are taken against (the backend's `now`).
   * @defaultValue `Date.now`
   */
  wall?: () => number;
}

/** How far the wall clock's and the monotonic clock's timing of one trip may differ. */
const WALL_SLACK_MS = 5;

/** What one acquire-or-renew did. */
export interface LockTurn {
  /** We hold the lock now. */
  leader: boolean;
  /** We did not hold it before this turn: a new term starts. */
  elected: boolean;
  /** The server's time of our write against the local midpoint of its round trip. */
  clock: ClockSample | null;
}

/**
 * Leader election on one KV key (DESIGN.md section 2): `create` acquires it (SET NX), `update`
 * with the last revision renews it every tick (compare-and-set: a lock someone else took
 * cannot be renewed), and the bucket TTL releases it when its holder stops renewing.
 *
 * The holder acts only while `isLeader()`: its last successful renewal is less than
 * `lockTtl - margin` old, timed from when that write was *sent* (the server's TTL starts at or
 * after that instant). So a holder that cannot renew (partitioned, stalled) stops acting
 * before its lock can expire and a standby can take over: two leaders never act at once.
 */
export class LeaderLock {
  /** Stop acting this long before the lock could expire (a tick, at most a quarter TTL). */
  readonly marginMs: number;
  private readonly key: string;
  private readonly monotonic: () => number;
  private readonly wall: () => number;
  private revision: number | null = null;
  private renewedAt = -Infinity;

  constructor(private readonly opts: LeaderLockOptions) {
    this.key = opts.key ?? RECONCILER_LOCK;
    this.monotonic = opts.monotonic ?? (() => performance.now());
    this.wall = opts.wall ?? Date.now;
    this.marginMs = Math.min(opts.tickMs, opts.lockTtlMs / 4);
  }

  /** True while we hold the lock and our last renewal cannot have expired yet. */
  isLeader(): boolean {
    return (
      this.revision !== null &&
      this.monotonic() - this.renewedAt <= this.opts.lockTtlMs - this.marginMs
    );
  }

  /** Acquires the lock when it is free, renews it when we hold it. Never throws. */
  async acquireOrRenew(): Promise<LockTurn> {
    const held = this.isLeader();
    const sentAt = this.monotonic();
    const wallSentAt = this.wall();
    try {
      this.revision =
        this.revision === null
          ? await this.opts.kv.create(this.key, this.opts.nodeId)
          : await this.renewOrAdopt(this.revision);
    } catch (err: unknown) {
      // Someone else holds it (or took it over after our lease ran out): follow.
      if (isWrongLastSequence(err)) this.revision = null;
      // Any other failure (timeout, disconnect) leaves the lease to run out on its own clock.
      return { leader: this.isLeader(), elected: false, clock: null };
    }
    this.renewedAt = sentAt;
    const roundTripMs = this.monotonic() - sentAt;
    const wallAckedAt = this.wall();
    return {
      leader: true,
      elected: !held,
      clock: await this.clockSample(wallSentAt, wallAckedAt, roundTripMs),
    };
  }

  /**
   * Renews with compare-and-set. A renewal whose reply was lost may have landed: then the
   * stored revision is newer than ours but the value is still our nodeId, and we adopt it.
   */
  private async renewOrAdopt(revision: number): Promise<number> {
    try {
      return await this.opts.kv.update(this.key, this.opts.nodeId, revision);
    } catch (err: unknown) {
      if (!isWrongLastSequence(err)) throw err;
      const e = await this.opts.kv.get(this.key);
      if (e?.operation !== 'PUT' || e.string() !== this.opts.nodeId) throw err;
      return await this.opts.kv.update(this.key, this.opts.nodeId, e.revision);
    }
  }

  /** The lock entry's server timestamp against the local midpoint of the write's round trip. */
  private async clockSample(
    sentAt: number,
    ackedAt: number,
    roundTripMs: number,
  ): Promise<ClockSample | null> {
    // The wall clock stepped during the trip: its midpoint means nothing.
    if (Math.abs(ackedAt - sentAt - roundTripMs) > WALL_SLACK_MS) return null;
    try {
      const e = await this.opts.kv.get(this.key);
      if (!e || e.revision !== this.revision) return null;
      return { offsetMs: e.created.getTime() - (sentAt + ackedAt) / 2, roundTripMs };
    } catch (_err: unknown) {
      return null;
    }
  }

  /** Gives the lock up (on a clean stop), so a standby need not wait for the TTL. */
  async release(): Promise<void> {
    const revision = this.revision;
    this.revision = null;
    this.renewedAt = -Infinity;
    if (revision === null) return;
    try {
      await this.opts.kv.delete(this.key, { previousSeq: revision });
    } catch (_err: unknown) {
      // Lost meanwhile, or unreachable: the TTL releases it either way.
    }
  }
}
