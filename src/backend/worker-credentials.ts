import { readFile } from 'node:fs/promises';
import { decode } from '@nats-io/jwt';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { mintWorkerJwt, workerJwtExpiresAtMs } from '../auth/mint.js';
import { pushRevocation } from '../auth/revoke.js';
import type { SonarConfig } from '../config.js';
import type { Logger } from '../log.js';
import { connectNats } from '../nats.js';
import type { WorkerCredentialIssuer } from './handlers/enrollment-handlers.js';

/** The account of a creds file's user: the account its JWT names, else its issuer. */
async function accountOfCreds(path: string): Promise<string> {
  const text = await readFile(path, 'utf8');
  const jwt = /-----BEGIN NATS USER JWT-----\s*(\S+?)\s*------END/.exec(text)?.[1];
  if (!jwt) {
    throw new SonarError(ErrorCode.Validation, `SONAR_NATS_CREDS: ${path} holds no user JWT`, {
      variable: 'SONAR_NATS_CREDS',
    });
  }
  const claims = decode<{ issuer_account?: string }>(jwt);
  return claims.nats.issuer_account ?? claims.iss;
}

const readSecret = async (variable: string, path: string): Promise<string> => {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw new SonarError(ErrorCode.Validation, `${variable}: cannot read ${path}: ${why}`, {
      variable,
      path,
    });
  }
};

/**
 * The secure-mode issuer from the backend's settings, or null (open mode) when
 * `SONAR_WORKER_SIGNING_KEY` is unset. Revocations are pushed when the operator signing
 * key and the SYS creds are both given; the SYS connection is opened on first use.
 */
export async function workerCredentialIssuer(
  config: SonarConfig,
  log: Logger,
  now: () => number,
): Promise<WorkerCredentialIssuer | null> {
  if (config.workerSigningKey === undefined) return null;
  if (config.natsCreds === undefined) {
    throw new SonarError(
      ErrorCode.Validation,
      'SONAR_WORKER_SIGNING_KEY needs SONAR_NATS_CREDS: the backend finds its account in its own creds',
      { variable: 'SONAR_NATS_CREDS' },
    );
  }
  const signingSeed = await readSecret('SONAR_WORKER_SIGNING_KEY', config.workerSigningKey);
  const accountPublicKey = await accountOfCreds(config.natsCreds);
  const ttlMs = config.workerCredentialTtlMs;
  const operatorSeed =
    config.natsOperatorSigningKey === undefined
      ? null
      : await readSecret('SONAR_NATS_OPERATOR_SIGNING_KEY', config.natsOperatorSigningKey);
  const sysCreds = config.natsSysCreds;
  let sys: Promise<NatsConnection> | null = null;
  return {
    async mint(workerId, publicKey) {
      const at = now();
      const jwt = await mintWorkerJwt({
        workerId,
        publicKey,
        signingSeed,
        accountPublicKey,
        ttlMs,
        now: at,
      });
      return { jwt, expiresAt: new Date(workerJwtExpiresAtMs(at, ttlMs)) };
    },
    async revoke(userPublicKey) {
      if (operatorSeed === null || sysCreds === undefined) return false;
      sys ??= connectNats(
        { ...config, natsCreds: sysCreds, natsInboxPrefix: undefined },
        { name: 'sonar-backend-sys' },
      );
      await pushRevocation({
        sys: await sys,
        accountPublicKey,
        operatorSigningSeed: operatorSeed,
        userPublicKey,
        at: now(),
        maxCredentialTtlMs: ttlMs,
      });
      log.info('revocation pushed', { userPublicKey });
      return true;
    },
    async close() {
      const c = sys;
      sys = null;
      if (c) await (await c).close().catch(() => {});
    },
  };
}
