import { randomBytes } from 'node:crypto';
import { nuid } from '@nats-io/transport-node';

/**
 * New ids, minted only in src/ (the pure core takes them as inputs). A nuid is 22 characters
 * of [0-9A-Za-z]: unique across processes, and valid under the id rule of DESIGN.md section 2.
 */
export const newId = (): string => nuid.next();

const TOKEN_BYTES = 32;
/** Tokens drawn from one CSPRNG call: the leader mints one per placement. */
const TOKEN_POOL_BYTES = TOKEN_BYTES * 128;
let tokenPool = Buffer.alloc(0);
let tokenAt = 0;

/** A fresh attempt token: 32 random bytes, hex. It travels only in the dispatch message. */
export function newToken(): string {
  if (tokenAt + TOKEN_BYTES > tokenPool.length) {
    tokenPool = randomBytes(TOKEN_POOL_BYTES);
    tokenAt = 0;
  }
  const token = tokenPool.toString('hex', tokenAt, tokenAt + TOKEN_BYTES);
  // Drawn bytes do not stay behind in the pool.
  tokenPool.fill(0, tokenAt, tokenAt + TOKEN_BYTES);
  tokenAt += TOKEN_BYTES;
  return token;
}

/**
 * A host name as an id token: every character outside `[A-Za-z0-9_-]` becomes `-`, cut to
 * `maxLength`. The start of process ids (workers, backends), so logs show where each runs.
 */
export const hostToken = (host: string, maxLength: number): string =>
  host.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, maxLength);
