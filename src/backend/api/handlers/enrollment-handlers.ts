import { ErrorCode, SonarError } from '../../../../actors/errors.js';
import type { CredentialReply } from '../../../protocol.js';
import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import { goneError, workerOf } from './worker-state.js';

/**
 * Mints and revokes workers' own NATS credentials (secure mode). Implemented with the
 * account's scoped signing key for workers; absent in open mode.
 */
export interface WorkerCredentialIssuer {
  /** A user JWT for `publicKey`, named `workerId` (the permission template's `{{name()}}`). */
  mint(workerId: string, publicKey: string): Promise<{ jwt: string; expiresAt: Date }>;
  /**
   * Disconnects every connection holding a credential of `publicKey` now. False when this
   * backend was given no way to push a revocation: the credential then lapses at expiry.
   */
  revoke(publicKey: string): Promise<boolean>;
  /**
   * The JetStream API prefix of the account workers are minted into, when that is not the
   * backend's own (`$JS.API`).
   */
  readonly jsApiPrefix?: string;
  /**
   * Whether the workers' account lets workers pull only through a backend (its signing
   * key's template grants `<prefix>.pull.<id>.*`, not the dispatch consumers).
   */
  readonly pullsThroughBackend?: boolean;
  /** Closes what the issuer opened (the connection that pushes revocations). */
  close(): Promise<void>;
}

const OPEN: CredentialReply = { mode: 'open', jwt: null, expiresAt: null };

/**
 * `enroll` (bootstrap credential), `renew` (the worker's own subject) and `revoke` (client
 * and operator). A Lost or Left worker's id gets no credential: it is `conflict`, as for join.
 */
export function enrollmentHandlers(ctx: BackendContext): Handlers {
  const issue = async (
    workerId: string,
    publicKey: string,
    refresh: boolean,
  ): Promise<CredentialReply> => {
    const issuer = ctx.credentials;
    if (!issuer) return OPEN;
    const worker = await workerOf(ctx, workerId);
    if (worker?.value === 'Lost' || worker?.value === 'Left')
      throw goneError(workerId, worker.value);
    await ctx.enrollments.bind(workerId, publicKey, { refresh });
    const { jwt, expiresAt } = await issuer.mint(workerId, publicKey);
    return {
      mode: 'secure',
      jwt,
      expiresAt: expiresAt.toISOString(),
      ...(issuer.jsApiPrefix !== undefined && { jsApiPrefix: issuer.jsApiPrefix }),
      ...(issuer.pullsThroughBackend === true && {
        pullSubject: ctx.names.subjects.pull(workerId),
      }),
    };
  };

  return {
    enroll: (req) => issue(req.workerId, req.publicKey, false),

    renew: (req) => issue(req.workerId, req.publicKey, true),

    revoke: async (req) => {
      const { workerId } = req;
      const enrollment = await ctx.enrollments.get(workerId);
      const worker = await workerOf(ctx, workerId);
      if (!enrollment && !worker) {
        throw new SonarError(ErrorCode.NotFound, `no worker ${workerId} to revoke`, { workerId });
      }
      await ctx.enrollments.revoke(workerId, enrollment?.publicKey ?? null);
      if (worker?.value === 'Active' || worker?.value === 'Draining') {
        const entry = await ctx.registry.kv.get(workerId);
        const lastPulseAt = entry?.operation === 'PUT' ? entry.created.toISOString() : null;
        await ctx.writer.write({
          subject: ctx.names.subjects.worker(workerId),
          type: 'WorkerLost',
          data: { reason: 'revoked', lastPulseAt },
          id: `revoked.${workerId}`,
        });
      }
      await ctx.registry.remove(workerId);
      const pushed =
        enrollment && enrollment.publicKey !== '' && ctx.credentials
          ? await ctx.credentials.revoke(enrollment.publicKey)
          : false;
      ctx.log.info('worker revoked', { workerId, reason: req.reason, pushed });
      return { workerId, revoked: true, pushed };
    },
  };
}
