import type { KV } from '@nats-io/kv';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import type { Names } from '../../../streams/names.js';

/** Which public key may act under a worker id, and whether the id was revoked. */
export interface Enrollment {
  publicKey: string;
  revoked: boolean;
}

/**
 * The `sonar_enrollments` bucket: a worker id belongs to the first public key that enrolls
 * under it. Without this, anyone holding the fleet's bootstrap credential could enroll under
 * a live worker's id and be given that worker's rights (its inbox, its subjects).
 */
export class Enrollments {
  private constructor(private readonly kv: KV) {}

  static async open(nc: NatsConnection, n: Names): Promise<Enrollments> {
    return new Enrollments(await new Kvm(nc).open(n.buckets.enrollments));
  }

  async get(workerId: string): Promise<Enrollment | null> {
    const e = await this.kv.get(workerId);
    if (!e || e.operation !== 'PUT') return null;
    const v = e.json<Partial<Enrollment>>();
    return typeof v.publicKey === 'string'
      ? { publicKey: v.publicKey, revoked: v.revoked === true }
      : null;
  }

  /**
   * Binds `workerId` to `publicKey` unless it is bound to another key (`conflict`) or was
   * revoked (`forbidden`). Binding again with the same key is a no-op, so a retried enroll
   * gets the same answer; `refresh` (a renewal) writes it again, so the entry ages from now.
   */
  async bind(workerId: string, publicKey: string, opts: { refresh?: boolean } = {}): Promise<void> {
    const value = JSON.stringify({ publicKey, revoked: false });
    try {
      await this.kv.create(workerId, value);
      return;
    } catch (err: unknown) {
      const now = await this.get(workerId);
      if (!now) throw err;
      if (now.revoked) throw revokedError(workerId);
      if (now.publicKey !== publicKey) {
        throw new SonarError(
          ErrorCode.Conflict,
          `worker id ${workerId} is enrolled with another key: a worker id is used by one process only`,
          { workerId },
        );
      }
    }
    if (opts.refresh) await this.kv.put(workerId, value);
  }

  /** Marks the id revoked for good (enroll and renew refuse it from then on). */
  async revoke(workerId: string, publicKey: string | null): Promise<void> {
    await this.kv.put(workerId, JSON.stringify({ publicKey: publicKey ?? '', revoked: true }));
  }
}

export function revokedError(workerId: string): SonarError {
  return new SonarError(ErrorCode.Forbidden, `worker ${workerId} was revoked`, { workerId });
}
