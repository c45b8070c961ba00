import { randomBytes } from 'node:crypto';
import { nuid } from '@nats-io/transport-node';

/**
 * New ids, minted only in src/ (the pure core takes them as inputs). A nuid is 22 characters
 * of [0-9A-Za-z]: unique across processes, and valid under the id rule of DESIGN.md section 2.
 */
export const newId = (): string => nuid.next();

/** A fresh attempt token: 32 random bytes, hex. It travels only in the dispatch message. */
export const newToken = (): string => randomBytes(32).toString('hex');

/**
 * A host name as an id token: every character outside `[A-Za-z0-9_-]` becomes `-`, cut to
 * `maxLength`. The start of process ids (workers, backends), so logs show where each runs.
 */
export const hostToken = (host: string, maxLength: number): string =>
  host.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, maxLength);
