/**
 * Mints a worker's user JWT with the scoped worker signing key (docs/threat-model.md): the JWT
 * names the worker and carries no permissions of its own (the server rejects a scoped user
 * that does); the key's template gives it `{{name()}}`-scoped rights.
 */
import { encodeUser, fromPublic, fromSeed } from '@nats-io/jwt';
import type { KeyPair } from '@nats-io/jwt';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { assertId } from '../../streams/ids.js';

export interface MintWorkerJwtInput {
  /** The worker id; the JWT's name, spliced raw into the template, so it is validated. */
  workerId: string;
  /** The worker's user nkey public key (`U...`); its seed never leaves the worker. */
  publicKey: string;
  /** The scoped worker signing key's seed (`SA...`, the file `worker-signing.nk`). */
  signingSeed: string | Uint8Array;
  /** The account the signing key belongs to (`A...`): the JWT's `issuer_account`. */
  accountPublicKey: string;
  /** The credential's life; at least 1 s (JWT times are whole seconds). */
  ttlMs: number;
  /** Epoch ms. */
  now: number;
}

/** A JWT's expiry in epoch ms: `exp` is whole seconds, truncated. */
export const workerJwtExpiresAtMs = (now: number, ttlMs: number): number =>
  Math.floor((now + ttlMs) / 1000) * 1000;

const invalid = (field: string, value: unknown, why: string): SonarError =>
  new SonarError(ErrorCode.Validation, `'${field}' ${why}, got ${JSON.stringify(value)}`, {
    field,
  });

/** Checks `publicKey` is a NATS user public key; returns it. */
export function assertUserPublicKey(publicKey: unknown, field = 'publicKey'): string {
  if (typeof publicKey !== 'string' || !publicKey.startsWith('U')) {
    throw invalid(field, publicKey, 'must be a NATS user public key (U...)');
  }
  try {
    fromPublic(publicKey);
  } catch {
    throw invalid(field, publicKey, 'is not a valid NATS user public key (bad encoding)');
  }
  return publicKey;
}

/** The signing key pair from a seed, checked to be an account key (scoped signing keys are). */
export function accountSigningKey(seed: string | Uint8Array, field = 'signingSeed'): KeyPair {
  const text = typeof seed === 'string' ? seed : new TextDecoder().decode(seed);
  const trimmed = text.trim();
  if (!trimmed.startsWith('SA')) {
    // never echo a seed: it is a secret
    throw new SonarError(ErrorCode.Validation, `'${field}' must be an account seed (SA...)`, {
      field,
    });
  }
  try {
    return fromSeed(new TextEncoder().encode(trimmed));
  } catch {
    throw new SonarError(ErrorCode.Validation, `'${field}' is not a valid account seed`, {
      field,
    });
  }
}

/** A user JWT for one worker, signed by the scoped key, expiring `ttlMs` after `now`. */
export async function mintWorkerJwt(input: MintWorkerJwtInput): Promise<string> {
  const { workerId, accountPublicKey, ttlMs, now } = input;
  assertId('workerId', workerId);
  const publicKey = assertUserPublicKey(input.publicKey);
  if (typeof accountPublicKey !== 'string' || !accountPublicKey.startsWith('A')) {
    throw invalid('accountPublicKey', accountPublicKey, 'must be an account public key (A...)');
  }
  if (!Number.isFinite(ttlMs) || ttlMs < 1000) {
    throw invalid('ttlMs', ttlMs, 'must be at least 1000');
  }
  if (!Number.isFinite(now)) throw invalid('now', now, 'must be epoch milliseconds');
  const signer = accountSigningKey(input.signingSeed);
  return encodeUser(
    workerId,
    publicKey,
    accountPublicKey,
    {},
    {
      signer,
      // no permissions of its own: the template is the whole of them
      scopedUser: true,
      exp: workerJwtExpiresAtMs(now, ttlMs) / 1000,
    },
  );
}
