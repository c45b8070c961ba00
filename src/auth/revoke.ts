/**
 * Revokes a worker's user key at runtime: the account JWT gets `revocations[<key>] = at`,
 * re-signed with the operator signing key and pushed to the full resolver with
 * `$SYS.REQ.CLAIMS.UPDATE`; the server disconnects that user at once and refuses every JWT
 * of that key issued at or before `at`. Needs a connection as the SYS account's user.
 */
import { decode, encodeAccount, fromSeed } from '@nats-io/jwt';
import type { Account, KeyPair } from '@nats-io/jwt';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { assertUserPublicKey } from './mint.js';

const REQUEST_TIMEOUT_MS = 5_000;
/** Rounds of lookup, push and read back before a concurrent writer is assumed to win. */
const MAX_ROUNDS = 3;

/** The account's JWT as the resolver holds it (`$SYS.REQ.ACCOUNT.<pub>.CLAIMS.LOOKUP`). */
export async function lookupAccountJwt(
  sys: NatsConnection,
  accountPublicKey: string,
): Promise<string> {
  let reply: string;
  try {
    const msg = await sys.request(`$SYS.REQ.ACCOUNT.${accountPublicKey}.CLAIMS.LOOKUP`, '', {
      timeout: REQUEST_TIMEOUT_MS,
    });
    reply = msg.string().trim();
  } catch (err: unknown) {
    throw new SonarError(
      ErrorCode.Unavailable,
      `account ${accountPublicKey}: no answer to the claims lookup (${errorText(err)}); ` +
        'is the server in operator mode with a full resolver, and SONAR_NATS_SYS_CREDS a SYS user?',
      { account: accountPublicKey },
      { cause: err },
    );
  }
  if (reply.split('.').length !== 3) {
    throw new SonarError(
      ErrorCode.NotFound,
      `account ${accountPublicKey}: the resolver holds no JWT for it`,
      { account: accountPublicKey },
    );
  }
  return reply;
}

/** Pushes an account JWT to the resolver (`$SYS.REQ.CLAIMS.UPDATE`); throws unless accepted. */
export async function pushAccountJwt(sys: NatsConnection, jwt: string): Promise<void> {
  let reply: { data?: { code?: number }; error?: { code?: number; description?: string } };
  try {
    const msg = await sys.request('$SYS.REQ.CLAIMS.UPDATE', jwt, { timeout: REQUEST_TIMEOUT_MS });
    reply = msg.json();
  } catch (err: unknown) {
    throw new SonarError(
      ErrorCode.Unavailable,
      `no answer to the account JWT update (${errorText(err)})`,
      {},
      { cause: err },
    );
  }
  if (reply.error !== undefined || reply.data?.code !== 200) {
    const why = reply.error?.description ?? JSON.stringify(reply);
    throw new SonarError(ErrorCode.Unavailable, `account JWT update refused: ${why}`, {});
  }
}

export interface RevocationInput {
  /** A connection as the SYS account's user (`sys.creds`). */
  sys: NatsConnection;
  /** The application account (`A...`). */
  accountPublicKey: string;
  /** The operator signing key's seed (`SO...`, the file `operator-signing.nk`). */
  operatorSigningSeed: string | Uint8Array;
  /** The worker's user public key (`U...`). */
  userPublicKey: string;
  /** Epoch ms: JWTs of that key issued at or before this second are refused. */
  at: number;
  /**
   * The longest life of a worker credential (`SONAR_WORKER_CREDENTIAL_TTL`). An entry older
   * than this only refuses JWTs that have expired anyway, so it is dropped: the account JWT
   * stays small however many workers were ever revoked. Entries of `*` are always kept.
   */
  maxCredentialTtlMs: number;
}

/**
 * The account claims with the key revoked at `atSec` and the entries older than
 * `pruneBeforeSec` dropped. Pure, for tests.
 */
export function withRevocation(
  account: Partial<Account>,
  userPublicKey: string,
  atSec: number,
  pruneBeforeSec: number,
): Partial<Account> {
  const revocations: Record<string, number> = {};
  for (const [key, sec] of Object.entries(account.revocations ?? {})) {
    if (key === '*' || sec >= pruneBeforeSec) revocations[key] = sec;
  }
  revocations[userPublicKey] = Math.max(revocations[userPublicKey] ?? 0, atSec);
  return { ...account, revocations };
}

/**
 * Revokes `userPublicKey` in the account and pushes the account JWT, then reads it back: a
 * concurrent push (another backend revoking) may have replaced ours, and then it is redone.
 */
export async function pushRevocation(input: RevocationInput): Promise<void> {
  const { sys, accountPublicKey, at, maxCredentialTtlMs } = input;
  const userPublicKey = assertUserPublicKey(input.userPublicKey, 'userPublicKey');
  const signer = operatorSigningKey(input.operatorSigningSeed);
  const atSec = Math.floor(at / 1000);
  const pruneBeforeSec = Math.floor((at - maxCredentialTtlMs) / 1000) - 1;
  for (let round = 1; round <= MAX_ROUNDS; round++) {
    const current = decode<Account>(await lookupAccountJwt(sys, accountPublicKey));
    if (current.sub !== accountPublicKey) {
      throw new SonarError(ErrorCode.Conflict, `the resolver answered for ${current.sub}`, {
        account: accountPublicKey,
      });
    }
    const claims = withRevocation(current.nats, userPublicKey, atSec, pruneBeforeSec);
    // encodeAccount sets type and version itself; keep the rest (limits, signing keys) as is
    const { type: _type, version: _version, ...account } = claims;
    const jwt = await encodeAccount(current.name, accountPublicKey, account, { signer });
    await pushAccountJwt(sys, jwt);
    const after = decode<Account>(await lookupAccountJwt(sys, accountPublicKey));
    if ((after.nats.revocations?.[userPublicKey] ?? -1) >= atSec) return;
  }
  throw new SonarError(
    ErrorCode.Unavailable,
    `revocation of ${userPublicKey} was replaced by other updates ${MAX_ROUNDS} times`,
    { userPublicKey },
  );
}

function operatorSigningKey(seed: string | Uint8Array): KeyPair {
  const text = (typeof seed === 'string' ? seed : new TextDecoder().decode(seed)).trim();
  if (!text.startsWith('SO')) {
    throw new SonarError(
      ErrorCode.Validation,
      `'operatorSigningSeed' must be an operator seed (SO...)`,
      { field: 'operatorSigningSeed' },
    );
  }
  try {
    return fromSeed(new TextEncoder().encode(text));
  } catch {
    throw new SonarError(ErrorCode.Validation, `'operatorSigningSeed' is not a valid seed`, {
      field: 'operatorSigningSeed',
    });
  }
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
