/**
 * Secure mode's credentials without a server: the permissions follow the prefix, the worker
 * template has no `resp`, minting refuses bad names and keys, revocation entries are pruned,
 * and `creds init` writes secrets 0600 and never replaces a file.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount, createUser, decode } from '@nats-io/jwt';
import type { Account } from '@nats-io/jwt';
import { afterAll, describe, expect, it } from 'vitest';
import { isSonarError } from '../../actors/errors.js';
import { names } from '../../streams/names.js';
import {
  CREDENTIAL_FILES,
  CREDENTIAL_FILE_USES,
  generateCredentials,
  writeCredentials,
} from '../../src/auth/creds-init.js';
import { mintWorkerJwt, workerJwtExpiresAtMs } from '../../src/auth/mint.js';
import { STATIC_ROLES, rolePermissions } from '../../src/auth/permissions.js';
import { withRevocation } from '../../src/auth/revoke.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** Whether export pattern `a` covers every subject `b` may name (`*` one token, `>` the rest). */
function covers(a: string, b: string): boolean {
  const p = a.split('.');
  const q = b.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return q.length > i;
    if (i >= q.length || q[i] === '>' || (p[i] !== '*' && p[i] !== q[i])) return false;
  }
  return p.length === q.length;
}

describe('rolePermissions', () => {
  it('names every subject from the prefix: a renamed prefix leaves no `sonar` behind', () => {
    const perms = rolePermissions(names('acme'));
    const all = Object.values(perms).flatMap((p) => [...p.pub, ...p.sub]);
    expect(all.filter((s) => /sonar/i.test(s))).toEqual([]);
    expect(perms.backend.pub).toContain('$KV.acme_enrollments.>');
    expect(perms.backend.pub).toContain('$KV.acme_sessions.>');
    expect(perms.worker.pub).toContain('acme.stage.{{name()}}.>');
    expect(perms.worker.pub).toContain('acme.js.API.STREAM.INFO.ACME_STAGING');
  });

  it('gives no role but the backend a shared inbox or CONSUMER.DELETE', () => {
    const perms = rolePermissions();
    for (const role of [...STATIC_ROLES, 'worker'] as const) {
      const { pub, sub } = perms[role];
      expect(
        sub.filter((s) => s.startsWith('_INBOX.')),
        role,
      ).toEqual([]);
      if (role !== 'backend') {
        expect(
          pub.filter((s) => s.includes('CONSUMER.DELETE')),
          role,
        ).toEqual([]);
        expect(
          pub.filter((s) => s.startsWith('_INBOX')),
          role,
        ).toEqual([]);
      }
    }
    expect(perms.bootstrap).toEqual({ pub: ['sonar.api.enroll'], sub: ['_INBOX_R.bootstrap.>'] });
  });
});

describe('generateCredentials', () => {
  it('gives the application account JetStream, the workers’ account the signing key and only imports, and the readers’ account only imports', async () => {
    const creds = await generateCredentials();
    const account = decode<Account>(creds.account.jwt);
    expect(account.iss).toBe(creds.operator.signingPublicKey);
    expect(account.nats.limits).toMatchObject({ conn: -1, disk_storage: -1, streams: -1 });
    expect(account.nats.signing_keys ?? []).toEqual([]);
    const workers = decode<Account>(creds.workersAccount.jwt);
    expect(workers.name).toBe('SONAR_WORKERS');
    expect(workers.iss).toBe(creds.operator.signingPublicKey);
    // no JetStream of its own: nothing a worker's request can make the server write into
    expect(workers.nats.limits).not.toHaveProperty('disk_storage');
    expect(workers.nats.limits).not.toHaveProperty('mem_storage');
    // every import is one the application account exports, from that account, and no
    // import reaches the whole JetStream API
    const exported = new Set((account.nats.exports ?? []).map((e) => `${e.type} ${e.subject}`));
    // the server refuses an account whose exports overlap: no export covers another
    const subjects = (account.nats.exports ?? []).map((e) => e.subject);
    for (const a of subjects) {
      for (const b of subjects) {
        if (a !== b) expect(covers(a, b), `${a} covers ${b}`).toBe(false);
      }
    }
    expect(new Set(subjects).size).toBe(subjects.length);
    const readers = decode<Account>(creds.readersAccount.jwt);
    expect(readers.name).toBe('SONAR_READERS');
    expect(readers.iss).toBe(creds.operator.signingPublicKey);
    expect(readers.nats.limits).not.toHaveProperty('disk_storage');
    expect(readers.nats.signing_keys ?? []).toEqual([]);
    for (const [name, imports] of [
      ['workers', workers.nats.imports ?? []],
      ['readers', readers.nats.imports ?? []],
    ] as const) {
      expect(imports.length, name).toBeGreaterThan(5);
      for (const i of imports) {
        expect(i.account).toBe(creds.account.publicKey);
        expect(exported.has(`${i.type} ${i.subject}`), i.subject).toBe(true);
        expect(i.subject).not.toMatch(/^\$JS\.API\.>$|^\$JS\.API\.[A-Z]+\.>$|^>$/);
        // a consumer create reaches a backend, which checks it, never JetStream itself
        expect(i.subject).not.toMatch(/DELETE|PURGE|UPDATE|CREATE/);
        // 2.9 crashes on an answer aimed at a mapped import that ends in `*`
        if (i.local_subject !== undefined) expect(i.local_subject, name).not.toMatch(/\*$/);
      }
    }
    for (const role of ['bootstrap', 'supervisor'] as const) {
      const user = decode<{ issuer_account?: string }>(creds.users[role].jwt);
      expect(user.iss, role).toBe(creds.workersAccount.publicKey);
    }
    for (const role of ['client', 'operator'] as const) {
      expect(decode(creds.users[role].jwt).iss, role).toBe(creds.readersAccount.publicKey);
    }
    expect(decode(creds.users.backend.jwt).iss).toBe(creds.account.publicKey);
    const [scoped] = workers.nats.signing_keys ?? [];
    expect(scoped).toMatchObject({ kind: 'user_scope', key: creds.workerSigning.publicKey });
    const template = (scoped as { template: Record<string, unknown> }).template;
    expect(template).not.toHaveProperty('resp');
    expect(template['sub']).toEqual({
      allow: ['_INBOX_W.{{name()}}.>', 'sonar.control.cancel'],
      deny: [],
    });
    const backend = decode<{ pub?: { allow?: string[] } }>(creds.users.backend.jwt);
    expect(backend.nats.pub?.allow).toContain('_INBOX_W.>');
  });
});

describe('mintWorkerJwt', () => {
  const account = createAccount();
  const signer = createAccount();
  const base = {
    workerId: 'w1',
    publicKey: createUser().getPublicKey(),
    signingSeed: new TextDecoder().decode(signer.getSeed()),
    accountPublicKey: account.getPublicKey(),
    ttlMs: 60_000,
    now: Date.UTC(2026, 0, 1, 0, 0, 0, 500),
  };

  it('names the worker, carries no permissions, and expires ttl after now', async () => {
    const claims = decode<Record<string, unknown>>(await mintWorkerJwt(base));
    expect(claims.name).toBe('w1');
    expect(claims.iss).toBe(signer.getPublicKey());
    expect(claims.exp! * 1000).toBe(workerJwtExpiresAtMs(base.now, base.ttlMs));
    expect(claims.exp! * 1000).toBe(Date.UTC(2026, 0, 1, 0, 1, 0));
    expect(Object.keys(claims.nats).sort()).toEqual(['issuer_account', 'type', 'version']);
  });

  it.each([
    ['workerId', { workerId: '*' }, /'workerId' must match/],
    ['workerId', { workerId: 'a.b' }, /'workerId' must match/],
    ['publicKey', { publicKey: account.getPublicKey() }, /'publicKey' must be a NATS user/],
    ['publicKey', { publicKey: 'UABC' }, /'publicKey' is not a valid/],
    ['signingSeed', { signingSeed: 'SUAXXXX' }, /'signingSeed' must be an account seed/],
    ['ttlMs', { ttlMs: 10 }, /'ttlMs' must be at least 1000/],
  ])('refuses a bad %s', async (_field, bad, message) => {
    const err = await mintWorkerJwt({ ...base, ...bad }).catch((e: unknown) => e);
    expect(isSonarError(err, 'validation'), String(err)).toBe(true);
    expect(String((err as Error).message)).toMatch(message);
  });
});

describe('withRevocation', () => {
  it('adds the key and drops entries older than the longest credential life, keeping `*`', () => {
    const out = withRevocation(
      { revocations: { UOLD: 100, UNEW: 950, '*': 5 }, limits: { conn: -1 } },
      'UKEY',
      1000,
      900,
    );
    expect(out.revocations).toEqual({ UNEW: 950, '*': 5, UKEY: 1000 });
    expect(out.limits).toEqual({ conn: -1 });
  });
});

describe('writeCredentials', () => {
  it('writes every listed file, secrets 0600, and refuses to replace any', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sonar-creds-'));
    dirs.push(dir);
    const creds = await generateCredentials();
    const paths = await writeCredentials(join(dir, 'c'), creds);
    for (const { file } of CREDENTIAL_FILE_USES) {
      const mode = (await stat(join(paths.dir, file))).mode & 0o777;
      expect(mode, file).toBe(/\.(nk|creds)$/.test(file) ? 0o600 : 0o644);
    }
    expect(Object.values(CREDENTIAL_FILES.creds).length).toBe(6);
    const conf = await readFile(paths.resolverConf, 'utf8');
    expect(conf).toContain(`system_account: ${creds.sysAccount.publicKey}`);
    expect(conf).toMatch(/type: full[\s\S]*allow_delete: false/);
    const again = await writeCredentials(join(dir, 'c'), await generateCredentials()).catch(
      (e: unknown) => e,
    );
    expect(isSonarError(again, 'conflict')).toBe(true);
    expect(await readFile(paths.workerSigningSeed, 'utf8')).toBe(`${creds.workerSigning.seed}\n`);
  });
});
