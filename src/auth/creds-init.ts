/**
 * `sonar creds init DIR`: every key, JWT and creds file of secure mode (docs/threat-model.md),
 * and `resolver.conf`, the server config fragment that trusts them.
 *
 * Operator `sonar` (identity key + one signing key, which signs every account and later
 * revocation updates), system account `SYS`, application account `SONAR` with JetStream, the
 * workers' account `SONAR_WORKERS` with no JetStream, the scoped worker signing key and the
 * imports of workers-account.ts, the readers' account `SONAR_READERS` with no JetStream and
 * the imports of readers-account.ts, and one user per static role with explicit permissions
 * (permissions.ts): bootstrap and supervisor in the workers' account, client and operator in
 * the readers' account, the backend in the application account. Files are created, never overwritten: a second init into the same
 * directory fails before it replaces a key a running fleet depends on.
 */
import { access, mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  createAccount,
  createOperator,
  createUser,
  encodeAccount,
  encodeOperator,
  encodeUser,
  fmtCreds,
  newScopedSigner,
} from '@nats-io/jwt';
import type { KeyPair, OperatorLimits, SigningKey } from '@nats-io/jwt';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { names } from '../../streams/names.js';
import {
  READER_ROLES,
  STATIC_ROLES,
  SYS_PERMISSIONS,
  WORKERS_ACCOUNT_ROLES,
  WORKER_SIGNING_ROLE,
  rolePermissions,
  secureNames,
} from './permissions.js';
import { readerBridges } from './readers-account.js';
import { bridgeExports, bridgeImports, workerBridges } from './workers-account.js';
import type { PermissionSet, StaticRole } from './permissions.js';

/** A role with a `.creds` file: the static roles and the SYS user. */
export type CredsRole = StaticRole | 'sys';

/** The file names inside DIR. */
export const CREDENTIAL_FILES = {
  operatorJwt: 'operator.jwt',
  sysAccountJwt: 'sys.jwt',
  accountJwt: 'sonar-account.jwt',
  workersAccountJwt: 'workers-account.jwt',
  readersAccountJwt: 'readers-account.jwt',
  resolverConf: 'resolver.conf',
  workerSigningSeed: 'worker-signing.nk',
  operatorSigningSeed: 'operator-signing.nk',
  operatorSeed: 'operator.nk',
  sysAccountSeed: 'sys-account.nk',
  accountSeed: 'sonar-account.nk',
  workersAccountSeed: 'workers-account.nk',
  readersAccountSeed: 'readers-account.nk',
  creds: {
    backend: 'backend.creds',
    client: 'client.creds',
    operator: 'operator.creds',
    supervisor: 'supervisor.creds',
    bootstrap: 'bootstrap.creds',
    sys: 'sys.creds',
  } satisfies Record<CredsRole, string>,
} as const;

/** Which process takes which file, one line each (what `sonar creds init` prints). */
export const CREDENTIAL_FILE_USES: readonly { file: string; use: string }[] = (() => {
  const f = CREDENTIAL_FILES;
  const reference = 'no process (already inside resolver.conf): a reference copy';
  return [
    { file: f.resolverConf, use: 'nats-server: `include` it in the server config' },
    { file: f.creds.backend, use: 'sonar backend: SONAR_NATS_CREDS' },
    { file: f.workerSigningSeed, use: 'sonar backend: SONAR_WORKER_SIGNING_KEY (secure mode)' },
    { file: f.workersAccountJwt, use: 'sonar backend: SONAR_WORKER_ACCOUNT_JWT (secure mode)' },
    { file: f.operatorSigningSeed, use: 'sonar backend: SONAR_NATS_OPERATOR_SIGNING_KEY' },
    { file: f.creds.sys, use: 'sonar backend: SONAR_NATS_SYS_CREDS' },
    { file: f.creds.bootstrap, use: 'sonar worker: SONAR_NATS_CREDS (the fleet credential)' },
    { file: f.creds.supervisor, use: 'sonar workers, sonar dev: SONAR_NATS_CREDS' },
    { file: f.creds.client, use: 'sonar submit, cancel, results, rerun (CI): SONAR_NATS_CREDS' },
    {
      file: f.creds.operator,
      use: 'sonar status, tail, export, cancel, rerun, poisoned, sweep, revoke: SONAR_NATS_CREDS',
    },
    { file: f.operatorJwt, use: reference },
    { file: f.sysAccountJwt, use: reference },
    { file: f.accountJwt, use: reference },
    { file: f.readersAccountJwt, use: reference },
    { file: f.operatorSeed, use: 'no process: keep offline (re-signs the operator)' },
    { file: f.sysAccountSeed, use: 'no process: keep offline (issues SYS users)' },
    { file: f.accountSeed, use: 'no process: keep offline (issues role users)' },
    { file: f.workersAccountSeed, use: 'no process: keep offline (issues bootstrap users)' },
    {
      file: f.readersAccountSeed,
      use: 'no process: keep offline (issues client and operator users)',
    },
  ];
})();

export interface CredentialsOptions {
  /** The Sonar prefix (`SONAR_PREFIX`); default `sonar`. */
  prefix?: string;
}

export interface WriteCredentialsOptions extends CredentialsOptions {
  /**
   * The full resolver's directory, written into resolver.conf: where nats-server keeps the
   * account JWTs it is sent. Default `<DIR>/jwt`, absolute.
   */
  resolverDir?: string;
}

/** An identity: its key pair and its JWT. */
export interface Issued {
  publicKey: string;
  jwt: string;
  seed: string;
}

/** Everything `generateCredentials` makes, in memory. */
export interface Credentials {
  prefix: string;
  operator: Issued & { signingSeed: string; signingPublicKey: string };
  sysAccount: Issued;
  /** The application account: JetStream, the backend, client and operator. */
  account: Issued;
  /** The workers' account: workers, bootstrap and supervisor, through the bridges only. */
  workersAccount: Issued;
  /** The scoped worker signing key (role `sonar-worker`), in `workersAccount.signing_keys`. */
  workerSigning: { publicKey: string; seed: string };
  /** The readers' account: clients and operators, through the bridges only. */
  readersAccount: Issued;
  users: Record<CredsRole, Issued & { creds: string }>;
}

/** The absolute path of each file written. */
export interface CredentialPaths {
  dir: string;
  operatorJwt: string;
  sysAccountJwt: string;
  accountJwt: string;
  workersAccountJwt: string;
  readersAccountJwt: string;
  resolverConf: string;
  workerSigningSeed: string;
  operatorSigningSeed: string;
  operatorSeed: string;
  sysAccountSeed: string;
  accountSeed: string;
  workersAccountSeed: string;
  readersAccountSeed: string;
  creds: Record<CredsRole, string>;
}

/** No limit, stated: `encodeAccount` sets none, and the server then refuses every connection. */
const UNLIMITED: OperatorLimits = {
  conn: -1,
  leaf: -1,
  subs: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
};

/** JetStream enabled and unbounded in the account; streams carry their own bounds. */
const JETSTREAM_UNLIMITED: OperatorLimits = {
  mem_storage: -1,
  disk_storage: -1,
  streams: -1,
  consumer: -1,
};

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);
const seedOf = (kp: KeyPair): string => text(kp.getSeed());

/**
 * The scoped worker signing key with its template. `newScopedSigner` always writes
 * `resp: {max: 0, ttl: 0}`, which nats-server reads as allow_responses (one reply within
 * two minutes to any requester): a worker answers no one, so `resp` goes.
 */
export function workerSigningKey(signer: KeyPair, template: PermissionSet): SigningKey {
  const scoped = newScopedSigner(signer, WORKER_SIGNING_ROLE, {
    pub: { allow: template.pub, deny: [] },
    sub: { allow: template.sub, deny: [] },
  });
  delete scoped.template.resp;
  return scoped;
}

async function issueUser(
  name: string,
  account: KeyPair,
  perms: PermissionSet,
): Promise<Issued & { creds: string }> {
  const kp = createUser();
  const jwt = await encodeUser(name, kp, account, {
    pub: { allow: perms.pub },
    sub: { allow: perms.sub },
  });
  return { publicKey: kp.getPublicKey(), jwt, seed: seedOf(kp), creds: text(fmtCreds(jwt, kp)) };
}

/** Makes every key and JWT, in memory. */
export async function generateCredentials(opts: CredentialsOptions = {}): Promise<Credentials> {
  const n = names(opts.prefix);
  const perms = rolePermissions(n);
  const operator = createOperator();
  const operatorSigning = createOperator();
  const sys = createAccount();
  const account = createAccount();
  const workersAccount = createAccount();
  const workerSigning = createAccount();
  const readersAccount = createAccount();
  const workers = workerBridges(n);
  const readers = readerBridges(n);

  const operatorJwt = await encodeOperator('sonar', operator, {
    system_account: sys.getPublicKey(),
    signing_keys: [operatorSigning.getPublicKey()],
  });
  const sysJwt = await encodeAccount(
    'SYS',
    sys,
    { limits: UNLIMITED },
    { signer: operatorSigning },
  );
  const accountJwt = await encodeAccount(
    secureNames(n).account,
    account,
    {
      limits: { ...UNLIMITED, ...JETSTREAM_UNLIMITED },
      exports: bridgeExports([...workers, ...readers]),
    },
    { signer: operatorSigning },
  );
  const workersAccountJwt = await encodeAccount(
    secureNames(n).workersAccount,
    workersAccount,
    {
      limits: UNLIMITED,
      imports: bridgeImports(workers, account.getPublicKey()),
      signing_keys: [workerSigningKey(workerSigning, perms.worker)],
    },
    { signer: operatorSigning },
  );
  const readersAccountJwt = await encodeAccount(
    secureNames(n).readersAccount,
    readersAccount,
    { limits: UNLIMITED, imports: bridgeImports(readers, account.getPublicKey()) },
    { signer: operatorSigning },
  );

  const users = {} as Record<CredsRole, Issued & { creds: string }>;
  for (const role of STATIC_ROLES) {
    const issuer = WORKERS_ACCOUNT_ROLES.has(role)
      ? workersAccount
      : (READER_ROLES as readonly StaticRole[]).includes(role)
        ? readersAccount
        : account;
    users[role] = await issueUser(role, issuer, perms[role]);
  }
  users.sys = await issueUser('sys', sys, SYS_PERMISSIONS);

  return {
    prefix: n.prefix,
    operator: {
      publicKey: operator.getPublicKey(),
      jwt: operatorJwt,
      seed: seedOf(operator),
      signingPublicKey: operatorSigning.getPublicKey(),
      signingSeed: seedOf(operatorSigning),
    },
    sysAccount: { publicKey: sys.getPublicKey(), jwt: sysJwt, seed: seedOf(sys) },
    account: { publicKey: account.getPublicKey(), jwt: accountJwt, seed: seedOf(account) },
    workersAccount: {
      publicKey: workersAccount.getPublicKey(),
      jwt: workersAccountJwt,
      seed: seedOf(workersAccount),
    },
    workerSigning: { publicKey: workerSigning.getPublicKey(), seed: seedOf(workerSigning) },
    readersAccount: {
      publicKey: readersAccount.getPublicKey(),
      jwt: readersAccountJwt,
      seed: seedOf(readersAccount),
    },
    users,
  };
}

/**
 * The server config fragment: trust the operator, name the system account, keep accounts in
 * a full resolver (the only kind that takes `$SYS.REQ.CLAIMS.UPDATE`, hence revocations at
 * runtime) that never deletes one, and preload every account so a fresh server knows them.
 */
export function resolverConf(creds: Credentials, resolverDir: string): string {
  return [
    `# Sonar secure mode (sonar creds init): include this file in the nats-server config.`,
    `operator: ${creds.operator.jwt}`,
    `system_account: ${creds.sysAccount.publicKey}`,
    `resolver: {`,
    `  type: full`,
    `  dir: ${JSON.stringify(resolverDir)}`,
    `  allow_delete: false`,
    `}`,
    `resolver_preload: {`,
    `  ${creds.sysAccount.publicKey}: ${creds.sysAccount.jwt}`,
    `  ${creds.account.publicKey}: ${creds.account.jwt}`,
    `  ${creds.workersAccount.publicKey}: ${creds.workersAccount.jwt}`,
    `  ${creds.readersAccount.publicKey}: ${creds.readersAccount.jwt}`,
    `}`,
    ``,
  ].join('\n');
}

async function firstExisting(paths: string[]): Promise<string | undefined> {
  for (const path of paths) {
    try {
      await access(path);
      return path;
    } catch {
      // absent: fine
    }
  }
  return undefined;
}

/** Writes every file into `dir` (created if missing). Fails if any file already exists. */
export async function writeCredentials(
  dir: string,
  creds: Credentials,
  opts: WriteCredentialsOptions = {},
): Promise<CredentialPaths> {
  const root = resolve(dir);
  await mkdir(root, { recursive: true, mode: 0o700 });
  const f = CREDENTIAL_FILES;
  const at = (name: string): string => join(root, name);
  const existing = await firstExisting(CREDENTIAL_FILE_USES.map((u) => at(u.file)));
  if (existing !== undefined) {
    throw new SonarError(
      ErrorCode.Conflict,
      `${existing} already exists: creds init never replaces keys; choose an empty directory`,
      { path: existing },
    );
  }
  const secret = async (name: string, content: string): Promise<void> =>
    writeFile(at(name), content.endsWith('\n') ? content : `${content}\n`, {
      flag: 'wx',
      mode: 0o600,
    });
  const open = async (name: string, content: string): Promise<void> =>
    writeFile(at(name), content.endsWith('\n') ? content : `${content}\n`, {
      flag: 'wx',
      mode: 0o644,
    });

  await open(f.operatorJwt, creds.operator.jwt);
  await open(f.sysAccountJwt, creds.sysAccount.jwt);
  await open(f.accountJwt, creds.account.jwt);
  await open(f.workersAccountJwt, creds.workersAccount.jwt);
  await open(f.readersAccountJwt, creds.readersAccount.jwt);
  await open(f.resolverConf, resolverConf(creds, opts.resolverDir ?? at('jwt')));
  await secret(f.workerSigningSeed, creds.workerSigning.seed);
  await secret(f.operatorSigningSeed, creds.operator.signingSeed);
  await secret(f.operatorSeed, creds.operator.seed);
  await secret(f.sysAccountSeed, creds.sysAccount.seed);
  await secret(f.accountSeed, creds.account.seed);
  await secret(f.workersAccountSeed, creds.workersAccount.seed);
  await secret(f.readersAccountSeed, creds.readersAccount.seed);
  const credsPaths = {} as Record<CredsRole, string>;
  for (const [role, file] of Object.entries(f.creds) as [CredsRole, string][]) {
    await secret(file, creds.users[role].creds);
    credsPaths[role] = at(file);
  }
  return {
    dir: root,
    operatorJwt: at(f.operatorJwt),
    sysAccountJwt: at(f.sysAccountJwt),
    accountJwt: at(f.accountJwt),
    workersAccountJwt: at(f.workersAccountJwt),
    readersAccountJwt: at(f.readersAccountJwt),
    resolverConf: at(f.resolverConf),
    workerSigningSeed: at(f.workerSigningSeed),
    operatorSigningSeed: at(f.operatorSigningSeed),
    operatorSeed: at(f.operatorSeed),
    sysAccountSeed: at(f.sysAccountSeed),
    accountSeed: at(f.accountSeed),
    workersAccountSeed: at(f.workersAccountSeed),
    readersAccountSeed: at(f.readersAccountSeed),
    creds: credsPaths,
  };
}

/** `sonar creds init DIR`: generate and write everything. */
export async function initCredentials(
  dir: string,
  opts: WriteCredentialsOptions = {},
): Promise<{ credentials: Credentials; paths: CredentialPaths }> {
  const credentials = await generateCredentials(opts);
  const paths = await writeCredentials(dir, credentials, opts);
  return { credentials, paths };
}
