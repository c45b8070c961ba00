/**
 * A nats-server in secure mode: `sonar creds init` into a temp dir, then a server whose
 * config includes the generated resolver.conf (operator mode, full resolver). Gives each
 * role's creds path and the environment a Sonar process of that role takes.
 * {@link startSecureCluster} does the same for a cluster: every node in operator mode with
 * a full resolver of its own.
 */
import { createUser } from '@nats-io/nkeys';
import type { KeyPair } from '@nats-io/nkeys';
import { connect, jwtAuthenticator } from '@nats-io/transport-node';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { workerInboxPrefix } from '../../streams/names.js';
import { initCredentials, resolverConf } from '../../src/auth/creds-init.js';
import type { CredentialPaths, Credentials, CredsRole } from '../../src/auth/creds-init.js';
import { mintWorkerJwt } from '../../src/auth/mint.js';
import { readCreds } from '../../src/nats-creds.js';
import { startNatsCluster } from './nats-cluster.js';
import type { NatsCluster, NatsClusterOptions } from './nats-cluster.js';
import { startNatsServer } from './nats-server.js';
import type { NatsServer } from './nats-server.js';
import { inTempRoot } from './temp-root.js';

/** What a secure server or cluster gives its tests: each role's credential, as files. */
export interface SecureEnvironment {
  /** The prefix the credentials were made for (`SONAR_PREFIX`). */
  prefix: string;
  /** Client URLs (one per node). */
  urls: string[];
  /** Each role's `.creds` path. */
  creds: Record<CredsRole, string>;
  /** `worker-signing.nk`: the scoped worker signing key's seed. */
  workerSigningKey: string;
  /** `operator-signing.nk`: signs account JWT updates (revocations). */
  operatorSigningKey: string;
  /** Every key and JWT, in memory (public keys, seeds). */
  credentials: Credentials;
  /**
   * A role's environment: `SONAR_NATS_URL`, `SONAR_NATS_CREDS`; the backend's also names
   * the worker signing key, the workers' account, the operator signing key and the SYS creds.
   */
  envFor(role: CredsRole): Record<string, string>;
  /**
   * A connection of the test process as `role`, with that role's inbox prefix (what
   * `connectNats` does with a role's creds file); `opts` on top (e.g. reconnect settings).
   */
  connectAs(role: CredsRole, opts?: Partial<ConnectionOptions>): Promise<NatsConnection>;
  /**
   * A credential for worker `workerId` as a backend mints one at enrollment: a fresh user key
   * and a JWT for it signed by the worker signing key (read from its file, as the backend
   * reads it), valid `ttlMs` (60 s) from `now` (the clock).
   */
  mintWorker(workerId: string, opts?: { ttlMs?: number; now?: number }): Promise<MintedWorker>;
  /**
   * A connection of the test process as the worker `minted` names, on that worker's inbox
   * prefix (what a worker does with its credential); `opts` on top.
   */
  connectAsWorker(minted: MintedWorker, opts?: Partial<ConnectionOptions>): Promise<NatsConnection>;
}

/** A worker's credential, minted in the test process (see {@link SecureEnvironment.mintWorker}). */
export interface MintedWorker {
  workerId: string;
  /** The worker's user key: its seed authenticates, its public key is what a revocation names. */
  key: KeyPair;
  jwt: string;
}

export interface SecureNats extends SecureEnvironment {
  server: NatsServer;
  /** The credentials directory (inside a temp dir that `stop()` removes). */
  dir: string;
  /** Stops the server and removes every file. */
  stop(): Promise<void>;
}

export const startSecureNats = (opts: { prefix?: string } = {}): Promise<SecureNats> =>
  inTempRoot('sonar-secure', async (root) => {
    const dir = join(root, 'creds');
    const storeDir = join(root, 'js');
    await mkdir(storeDir);
    const { credentials, paths } = await initCredentials(dir, {
      ...(opts.prefix !== undefined && { prefix: opts.prefix }),
      resolverDir: join(root, 'resolver'),
    });
    const config = join(root, 'server.conf');
    // `-a 127.0.0.1 -p -1` on the command line (nats-server.ts) set the listen address
    await writeFile(
      config,
      `jetstream { store_dir: ${JSON.stringify(storeDir)} }\n` +
        `include ${JSON.stringify('./creds/resolver.conf')}\n`,
    );
    const server = await startNatsServer({ config, storeDir });
    return {
      ...secureEnvironment([server.url], credentials, paths),
      server,
      dir,
      stop: () => server.stop(),
    };
  });

/** The role environments and connections of credentials `paths` on servers `urls`. */
function secureEnvironment(
  urls: string[],
  credentials: Credentials,
  paths: CredentialPaths,
): SecureEnvironment {
  return {
    prefix: credentials.prefix,
    urls,
    creds: paths.creds,
    workerSigningKey: paths.workerSigningSeed,
    operatorSigningKey: paths.operatorSigningSeed,
    credentials,
    envFor: (role) => ({
      SONAR_NATS_URL: urls.join(','),
      SONAR_NATS_CREDS: paths.creds[role],
      ...(role === 'backend' && {
        SONAR_WORKER_SIGNING_KEY: paths.workerSigningSeed,
        SONAR_WORKER_ACCOUNT_JWT: paths.workersAccountJwt,
        SONAR_NATS_OPERATOR_SIGNING_KEY: paths.operatorSigningSeed,
        SONAR_NATS_SYS_CREDS: paths.creds.sys,
      }),
    }),
    connectAs: (role, opts = {}) => connectRole(urls, paths.creds[role], opts),
    async mintWorker(workerId, { ttlMs = 60_000, now = Date.now() } = {}) {
      const key = createUser();
      const jwt = await mintWorkerJwt({
        workerId,
        publicKey: key.getPublicKey(),
        signingSeed: await readFile(paths.workerSigningSeed, 'utf8'),
        accountPublicKey: credentials.workersAccount.publicKey,
        ttlMs,
        now,
      });
      return { workerId, key, jwt };
    },
    connectAsWorker: (minted, opts = {}) =>
      connect({
        servers: urls,
        authenticator: jwtAuthenticator(minted.jwt, minted.key.getSeed()),
        inboxPrefix: workerInboxPrefix(minted.workerId),
        ...opts,
      }),
  };
}

async function connectRole(
  urls: string[],
  credsPath: string,
  opts: Partial<ConnectionOptions>,
): Promise<NatsConnection> {
  const { authenticator, inboxPrefix } = await readCreds(credsPath);
  return connect({
    servers: urls,
    authenticator,
    ...(inboxPrefix !== undefined && { inboxPrefix }),
    ...opts,
  });
}

export interface SecureCluster extends SecureEnvironment {
  cluster: NatsCluster;
  /** The credentials directory (inside a temp dir that `stop()` removes). */
  dir: string;
  /** Stops every node and removes every file. */
  stop(): Promise<void>;
}

/**
 * A cluster in secure mode (see nats-cluster.ts for the nodes): one `sonar creds init`, and
 * every node's config holds what resolver.conf holds (operator, system account, a full
 * resolver that preloads every account), each node with a resolver directory of its own.
 * Readiness is checked with the backend's credential: the one role in the account that has
 * JetStream.
 */
export async function startSecureCluster(
  opts: { prefix?: string } & Omit<NatsClusterOptions, 'nodeConfig' | 'connectOptions'> = {},
): Promise<SecureCluster> {
  const { prefix, ...clusterOpts } = opts;
  return inTempRoot('sonar-secure-cluster', async (root) => {
    const dir = join(root, 'creds');
    const { credentials, paths } = await initCredentials(dir, {
      ...(prefix !== undefined && { prefix }),
    });
    const backend = await readCreds(paths.creds.backend);
    const cluster = await startNatsCluster({
      ...clusterOpts,
      // The generated fragment, with the node's own JWT directory in place of the shared one.
      nodeConfig: (node) => resolverConf(credentials, join(node.dir, 'jwt')),
      connectOptions: {
        authenticator: backend.authenticator,
        ...(backend.inboxPrefix !== undefined && { inboxPrefix: backend.inboxPrefix }),
      },
    });
    return {
      ...secureEnvironment(cluster.urls, credentials, paths),
      cluster,
      dir,
      stop: () => cluster.stop(),
    };
  });
}
