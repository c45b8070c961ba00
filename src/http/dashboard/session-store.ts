import { createHash, randomBytes } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import type { Names } from '../../../streams/names.js';

/** Dashboard logins, as {@link DashboardAuth} needs them. */
export interface Sessions {
  /** How long a session lasts from its login. */
  readonly ttlMs: number;
  /** Starts a session; returns its id (the cookie's value). */
  create(): Promise<string>;
  /** Whether `id` names a session not expired and not logged out. */
  isLive(id: string): Promise<boolean>;
  /** Ends the session `id` on every backend. */
  revoke(id: string): Promise<void>;
}

/** 32 random bytes, base64url: what a session id looks like; anything else is refused unread. */
const SESSION_ID_RE = /^[A-Za-z0-9_-]{43}$/;

interface SessionRecord {
  createdAt: number;
}

/**
 * Sessions in the `sonar_sessions` bucket, shared by every backend: a logout (a delete) on
 * one is seen by all, and the bucket TTL (`SONAR_SESSION_TTL`) ends a session on the server
 * side whatever the browser keeps. The key is the SHA-256 of the id, so whoever reads the
 * bucket learns no cookie. The id is random (not derived from the token), so one session
 * can end alone. The login time is checked too, in case the bucket's TTL was provisioned
 * longer by a backend with another setting.
 */
export class SessionStore implements Sessions {
  private constructor(
    private readonly kv: KV,
    readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  static async open(
    nc: NatsConnection,
    n: Names,
    ttlMs: number,
    now: () => number = Date.now,
  ): Promise<SessionStore> {
    return new SessionStore(await new Kvm(nc).open(n.buckets.sessions), ttlMs, now);
  }

  async create(): Promise<string> {
    const id = randomBytes(32).toString('base64url');
    const record: SessionRecord = { createdAt: this.now() };
    await this.reach(() => this.kv.create(keyOf(id), JSON.stringify(record)));
    return id;
  }

  async isLive(id: string): Promise<boolean> {
    if (!SESSION_ID_RE.test(id)) return false;
    const entry = await this.reach(() => this.kv.get(keyOf(id)));
    if (entry === null || entry.operation !== 'PUT') return false;
    let record: Partial<SessionRecord>;
    try {
      record = entry.json<Partial<SessionRecord>>();
    } catch (_err: unknown) {
      return false;
    }
    const age = this.now() - (record.createdAt ?? Number.NEGATIVE_INFINITY);
    return age >= 0 && age < this.ttlMs;
  }

  async revoke(id: string): Promise<void> {
    if (!SESSION_ID_RE.test(id)) return;
    await this.reach(() => this.kv.delete(keyOf(id)));
  }

  /** A session store out of reach is `unavailable` (503), never "logged out". */
  private async reach<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err: unknown) {
      throw new SonarError(
        ErrorCode.Unavailable,
        'the session store did not answer',
        {},
        {
          cause: err,
        },
      );
    }
  }
}

const keyOf = (id: string): string => createHash('sha256').update(id).digest('hex');
