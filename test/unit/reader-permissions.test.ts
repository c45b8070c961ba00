import { describe, expect, it } from 'vitest';
import { generateCredentials } from '../../src/auth/creds-init.js';
import {
  READER_ROLES,
  readerJsNeeds,
  readerLocalSubject,
  rolePermissions,
} from '../../src/auth/permissions.js';
import { readerBridges } from '../../src/auth/readers-account.js';
import { names } from '../../streams/names.js';

/** NATS subject matching: `*` one token, `>` one or more at the end. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

describe('reader permissions', () => {
  const n = names();
  const perms = rolePermissions(n);
  const needs = readerJsNeeds(n);

  it('let each reader role publish every JetStream read it needs, under the readers’ prefix', () => {
    for (const role of READER_ROLES) {
      for (const need of needs[role]) {
        const local = readerLocalSubject(n, need);
        expect(
          perms[role].pub.some((p) => matches(p, local)),
          `${role}: ${local}`,
        ).toBe(true);
      }
    }
  });

  it('keep the roles apart: a client reads no registry, an operator no results', () => {
    const registry = `${n.subjects.readerJsApi}.DIRECT.GET.KV_${n.buckets.workers}.$KV.${n.buckets.workers}.w1`;
    const results = `${n.subjects.readerJsApi}.DIRECT.GET.KV_${n.buckets.results}.$KV.${n.buckets.results}.r.t`;
    expect(perms.client.pub.some((p) => matches(p, registry))).toBe(false);
    expect(perms.operator.pub.some((p) => matches(p, results))).toBe(false);
    expect(perms.operator.pub.some((p) => matches(p, registry))).toBe(true);
    expect(perms.client.pub.some((p) => matches(p, results))).toBe(true);
  });

  it('import exactly the needs, a consumer create only through a backend', () => {
    const bridges = readerBridges(n);
    const creates = bridges.filter((b) => b.local?.includes('.CONSUMER.CREATE.'));
    expect(creates.length).toBeGreaterThan(0);
    for (const b of creates)
      expect(b.subject.startsWith(`${n.subjects.readerConsumerCreate}.`)).toBe(true);
    for (const b of bridges) expect(b.subject).not.toMatch(/^\$JS\.API\.CONSUMER\.(CREATE|DELETE)/);
  });

  it('keep reader JWTs well inside nats-server’s 4 KiB CONNECT line', async () => {
    const creds = await generateCredentials();
    for (const role of READER_ROLES) expect(creds.users[role].jwt.length, role).toBeLessThan(3_000);
  });
});
