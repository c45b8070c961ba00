import { perFile } from './per-file.js';
import { startSecureCluster, startSecureNats } from './secure-nats.js';
import type { SecureCluster, SecureNats } from './secure-nats.js';

/**
 * One nats-server in secure mode (see {@link startSecureNats}) for the calling test file:
 * started before its first test, stopped (with its credentials removed) after its last. Call
 * at the top level; call the result inside tests only.
 */
export const securePerFile = (opts: { prefix?: string } = {}): (() => SecureNats) =>
  perFile(
    'securePerFile',
    () => startSecureNats(opts),
    (s) => s.stop(),
  );

/**
 * A nats-server cluster in secure mode (see {@link startSecureCluster}) for the calling test
 * file, like {@link securePerFile}.
 */
export const secureClusterPerFile = (
  opts: Parameters<typeof startSecureCluster>[0] = {},
): (() => SecureCluster) =>
  perFile(
    'secureClusterPerFile',
    () => startSecureCluster(opts),
    (s) => s.stop(),
    // every node must elect a meta leader with the others before the first test
    { timeoutMs: 60_000 },
  );
