import { hash, timingSafeEqual } from 'node:crypto';

/** The sha256 (hex) of an attempt token: what `TaskPublished.tokenHash` keeps. */
export const tokenHashOf = (token: string): string => hash('sha256', token, 'hex');

/**
 * True when `token` hashes to `tokenHash`. The digests are compared in constant time, so the
 * time a refusal takes says nothing about how much of a forged token was right.
 */
export function tokenMatches(token: string, tokenHash: string): boolean {
  const given = Buffer.from(tokenHashOf(token), 'hex');
  const kept = Buffer.from(tokenHash, 'hex');
  return given.length === kept.length && timingSafeEqual(given, kept);
}
