/**
 * A nats-server in secure mode: `sonar creds init` into a temp dir, then a server whose
 * config includes the generated resolver.conf (operator mode, full resolver). Gives each
 * role's creds path and the environment a Sonar process of that role takes.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initCredentials } from '../../src/auth/creds-init.js';
import type { Credentials, CredsRole } from '../../src/auth/creds-init.js';
import { startNatsServer } from './nats-server.js';
import type { NatsServer } from './nats-server.js';

export interface SecureNats {
  server: NatsServer;
  /** The credentials directory (inside a temp dir that `stop()` removes). */
  dir: string;
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
   * the worker signing key, the operator signing key and the SYS creds.
   */
  envFor(role: CredsRole): Record<string, string>;
  /** Stops the server and removes every file. */
  stop(): Promise<void>;
}

export async function startSecureNats(opts: { prefix?: string } = {}): Promise<SecureNats> {
  const root = await mkdtemp(join(tmpdir(), 'sonar-secure-'));
  try {
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
    const envFor = (role: CredsRole): Record<string, string> => ({
      SONAR_NATS_URL: server.url,
      SONAR_NATS_CREDS: paths.creds[role],
      ...(role === 'backend' && {
        SONAR_WORKER_SIGNING_KEY: paths.workerSigningSeed,
        SONAR_NATS_OPERATOR_SIGNING_KEY: paths.operatorSigningSeed,
        SONAR_NATS_SYS_CREDS: paths.creds.sys,
      }),
    });
    return {
      server,
      dir,
      creds: paths.creds,
      workerSigningKey: paths.workerSigningSeed,
      operatorSigningKey: paths.operatorSigningSeed,
      credentials,
      envFor,
      async stop() {
        await server.stop();
        await rm(root, { recursive: true, force: true, maxRetries: 3 });
      },
    };
  } catch (err: unknown) {
    await rm(root, { recursive: true, force: true, maxRetries: 3 });
    throw err;
  }
}
