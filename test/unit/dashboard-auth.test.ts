import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { DashboardAuth, isLocalHost, isSameOrigin } from '../../src/http/dashboard/auth.js';
import { Router } from '../../src/http/dashboard/router.js';

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('DashboardAuth', () => {
  const auth = new DashboardAuth('s3cret');
  const cookie = auth.sessionCookie().split(';')[0]!;

  it('lets everything through without a token', () => {
    expect(new DashboardAuth(undefined).allows(req({}))).toBe(true);
  });

  it('takes the bearer token or the session cookie, nothing else', () => {
    expect(auth.allows(req({ authorization: 'Bearer s3cret' }))).toBe(true);
    expect(auth.allows(req({ authorization: 'Bearer s3cre' }))).toBe(false);
    expect(auth.allows(req({ authorization: 's3cret' }))).toBe(false);
    expect(auth.allows(req({}))).toBe(false);
    expect(auth.allows(req({ cookie: `a=b; ${cookie}` }))).toBe(true);
    expect(auth.allows(req({ cookie: 'sonar_session=s3cret' }))).toBe(false);
    expect(cookie).not.toContain('s3cret');
    expect(auth.accepts('s3cret')).toBe(true);
    expect(auth.accepts('')).toBe(false);
  });

  it('serves only local Host names without a token (DNS rebinding)', () => {
    for (const host of ['localhost:8080', '127.0.0.1:1', '[::1]:80', '10.0.0.5']) {
      expect(isLocalHost(host), host).toBe(true);
    }
    expect(isLocalHost('evil.example:8080')).toBe(false);
    expect(isLocalHost('127.0.0.1.nip.io')).toBe(false);
  });

  it('refuses cross-origin posts', () => {
    expect(isSameOrigin(req({ host: 'localhost:9', origin: 'http://localhost:9' }))).toBe(true);
    expect(isSameOrigin(req({ host: 'localhost:9' }))).toBe(true);
    expect(isSameOrigin(req({ host: 'localhost:9', origin: 'http://evil.example' }))).toBe(false);
    expect(isSameOrigin(req({ host: 'localhost:9', origin: 'null' }))).toBe(false);
  });
});

describe('Router', () => {
  const r = new Router().get('/runs/:runId', () => {}).post('/api/runs/:runId/cancel', () => {});

  it('matches paths with decoded params, HEAD as GET, and knows wrong methods', () => {
    const hit = r.match('GET', '/runs/a%2Db');
    expect(hit).not.toBeNull();
    expect(hit !== 'method-not-allowed' && hit?.params).toEqual({ runId: 'a-b' });
    expect(r.match('HEAD', '/runs/x')).not.toBeNull();
    expect(r.match('POST', '/runs/x')).toBe('method-not-allowed');
    expect(r.match('GET', '/runs/x/y')).toBeNull();
    expect(r.match('GET', '/metrics')).toBeNull();
  });
});
