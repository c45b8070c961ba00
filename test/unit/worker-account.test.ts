/**
 * The backend's choice of the account it mints workers into (`SONAR_WORKER_ACCOUNT_JWT`):
 * the workers' account of `sonar creds init`, checked against the signing key; unset, the
 * backend's own account, as older credential directories expect, said with a warning.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decode } from '@nats-io/jwt';
import { createUser } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initCredentials } from '../../src/auth/creds-init.js';
import type { CredentialPaths, Credentials } from '../../src/auth/creds-init.js';
import { workerCredentialIssuer } from '../../src/backend/api/worker-credentials.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';

let tmp: string;
let one: { credentials: Credentials; paths: CredentialPaths };
let other: { credentials: Credentials; paths: CredentialPaths };
const lines: string[] = [];
const log = createLogger({
  level: 'warn',
  destination: { write: (l: string) => void lines.push(l) },
});

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'sonar-worker-account-'));
  one = await initCredentials(join(tmp, 'one'));
  other = await initCredentials(join(tmp, 'other'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const issuerWith = (env: Record<string, string>) =>
  workerCredentialIssuer(
    loadConfig({ SONAR_NATS_CREDS: one.paths.creds.backend, ...env }),
    log,
    () => Date.now(),
  );

describe('SONAR_WORKER_ACCOUNT_JWT', () => {
  it('mints into the workers’ account and names its JetStream API prefix', async () => {
    const issuer = await issuerWith({
      SONAR_WORKER_SIGNING_KEY: one.paths.workerSigningSeed,
      SONAR_WORKER_ACCOUNT_JWT: one.paths.workersAccountJwt,
    });
    const { jwt } = await issuer!.mint('w1', createUser().getPublicKey());
    const claims = decode<{ issuer_account?: string }>(jwt);
    expect(claims.nats.issuer_account).toBe(one.credentials.workersAccount.publicKey);
    expect(issuer!.jsApiPrefix).toBe('sonar.js.API');
  });

  it('refuses a workers’ account that does not list the signing key, naming the variable', async () => {
    await expect(
      issuerWith({
        SONAR_WORKER_SIGNING_KEY: one.paths.workerSigningSeed,
        SONAR_WORKER_ACCOUNT_JWT: other.paths.workersAccountJwt,
      }),
    ).rejects.toThrow(/SONAR_WORKER_ACCOUNT_JWT: account A\w+ does not list the key/);
    await expect(
      issuerWith({
        SONAR_WORKER_SIGNING_KEY: one.paths.workerSigningSeed,
        SONAR_WORKER_ACCOUNT_JWT: one.paths.creds.client,
      }),
    ).rejects.toThrow(/SONAR_WORKER_ACCOUNT_JWT: .* holds no account JWT/);
  });

  it('unset, mints into the backend’s own account and warns', async () => {
    const issuer = await issuerWith({ SONAR_WORKER_SIGNING_KEY: one.paths.workerSigningSeed });
    const { jwt } = await issuer!.mint('w1', createUser().getPublicKey());
    expect(decode<{ issuer_account?: string }>(jwt).nats.issuer_account).toBe(
      one.credentials.account.publicKey,
    );
    expect(issuer!.jsApiPrefix).toBeUndefined();
    expect(lines.join('\n')).toMatch(/SONAR_WORKER_ACCOUNT_JWT is unset/);
  });
});
