import { readFile } from 'node:fs/promises';
import { decode } from '@nats-io/jwt';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { accountSigningKey, mintWorkerJwt, workerJwtExpiresAtMs } from '../../auth/mint.js';
import { workerPullPattern } from '../../auth/permissions.js';
import { pushRevocation } from '../../auth/revoke.js';
import type { SonarConfig } from '../../config.js';
import type { Logger } from '../../log.js';
import { connectNats } from '../../nats.js';
import { names } from '../../../streams/names.js';
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

/**
 * The workers' account from `SONAR_WORKER_ACCOUNT_JWT`, checked to list the worker signing
 * key: a key of another account mints JWTs the server refuses, which a worker could only
 * report as a refused connection.
 */
async function workersAccountOf(
  path: string,
  signingPublicKey: string,
  pullPattern: string,
): Promise<{ account: string; pullsThroughBackend: boolean }> {
  const variable = 'SONAR_WORKER_ACCOUNT_JWT';
  const text = await readSecret(variable, path);
  let claims: { sub: string; nats: { type?: string; signing_keys?: unknown[] } };
  try {
    claims = decode(text);
  } catch {
    throw new SonarError(ErrorCode.Validation, `${variable}: ${path} holds no account JWT`, {
      variable,
      path,
    });
  }
  if (claims.nats.type !== 'account') {
    throw new SonarError(
      ErrorCode.Validation,
      `${variable}: ${path} holds a ${claims.nats.type ?? 'non-account'} JWT, not an account JWT`,
      { variable, path },
    );
  }
  const keys = (claims.nats.signing_keys ?? []).map((k) =>
    typeof k === 'string' ? { key: k } : (k as ScopedKey),
  );
  const key = keys.find((k) => k.key === signingPublicKey);
  if (key === undefined) {
    throw new SonarError(
      ErrorCode.Validation,
      `${variable}: account ${claims.sub} does not list the key of SONAR_WORKER_SIGNING_KEY ` +
        `(${signingPublicKey}) among its signing keys: the two come from different \`sonar creds init\` runs`,
      { variable, path },
    );
  }
  // Accounts made before workers pulled through a backend let them pull the consumers.
  const pullsThroughBackend = key.template?.pub?.allow?.includes(pullPattern) === true;
  return { account: claims.sub, pullsThroughBackend };
}

/** A signing key of an account JWT; a scoped one carries its users' template. */
interface ScopedKey {
  key?: string;
  template?: { pub?: { allow?: string[] } };
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
  const n = names(config.prefix);
  const workersAccount =
    config.workerAccountJwt === undefined
      ? null
      : await workersAccountOf(
          config.workerAccountJwt,
          accountSigningKey(signingSeed, 'SONAR_WORKER_SIGNING_KEY').getPublicKey(),
          workerPullPattern(n),
        );
  const accountPublicKey = workersAccount?.account ?? (await accountOfCreds(config.natsCreds));
  if (config.workerAccountJwt === undefined) {
    log.warn(
      "SONAR_WORKER_ACCOUNT_JWT is unset: workers are minted into the backend's own account, " +
        'where a worker can have the server answer onto any subject; make credentials with ' +
        '`sonar creds init` and set it to workers-account.jwt (docs/threat-model.md)',
    );
  }
  const ttlMs = config.workerCredentialTtlMs;
  const operatorSeed =
    config.natsOperatorSigningKey === undefined
      ? null
      : await readSecret('SONAR_NATS_OPERATOR_SIGNING_KEY', config.natsOperatorSigningKey);
  const sysCreds = config.natsSysCreds;
  let sys: Promise<NatsConnection> | null = null;
  return {
    ...(workersAccount !== null && {
      jsApiPrefix: n.subjects.workerJsApi,
      pullsThroughBackend: workersAccount.pullsThroughBackend,
    }),
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
