import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { DashboardAuth, isLocalHost, isSameOrigin } from '../../src/http/dashboard/auth.js';
import type { Sessions } from '../../src/http/dashboard/session-store.js';
import { Router } from '../../src/http/dashboard/router.js';

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

/** Sessions in a Map: the unit under test is the token and cookie logic, not the bucket. */
class MemorySessions implements Sessions {
  readonly ttlMs = 3_600_000;
  readonly live = new Set<string>();
  private n = 0;
  create(): Promise<string> {
    const id = `session-${++this.n}`;
    this.live.add(id);
    return Promise.resolve(id);
  }
  isLive(id: string): Promise<boolean> {
    return Promise.resolve(this.live.has(id));
  }
  revoke(id: string): Promise<void> {
    this.live.delete(id);
    return Promise.resolve();
  }
}

describe('DashboardAuth', () => {
  const sessions = new MemorySessions();
  const auth = new DashboardAuth({ token: 's3cret', sessions });

  it('lets everything through without a token', async () => {
    expect(await new DashboardAuth().allows(req({}))).toBe(true);
  });

  it('takes the bearer token or a live session cookie, nothing else', async () => {
    const cookie = (await auth.login(req({}))).split(';')[0]!;
    expect(await auth.allows(req({ authorization: 'Bearer s3cret' }))).toBe(true);
    expect(await auth.check(req({ authorization: 'Bearer s3cre' }))).toBe('bad-token');
    expect(await auth.allows(req({ authorization: 's3cret' }))).toBe(false);
    expect(await auth.check(req({}))).toBe('none');
    expect(await auth.allows(req({ cookie: `a=b; ${cookie}` }))).toBe(true);
    expect(await auth.allows(req({ cookie: 'sonar_session=s3cret' }))).toBe(false);
    expect(cookie).not.toContain('s3cret');
    expect(auth.accepts('s3cret')).toBe(true);
    expect(auth.accepts('')).toBe(false);
  });

  it('each login is its own session; a logout ends that one only', async () => {
    const a = (await auth.login(req({}))).split(';')[0]!;
    const b = (await auth.login(req({}))).split(';')[0]!;
    expect(a).not.toBe(b);
    const cleared = await auth.logout(req({ cookie: a }));
    expect(cleared).toMatch(/^sonar_session=; .*Max-Age=0/);
    expect(await auth.allows(req({ cookie: a }))).toBe(false);
    expect(await auth.allows(req({ cookie: b }))).toBe(true);
  });

  it('marks the cookie Secure behind TLS (auto), always (true) or never (false)', async () => {
    const attrs = async (a: DashboardAuth, headers: Record<string, string>, tls = false) => {
      const r = { headers, socket: { encrypted: tls } } as unknown as IncomingMessage;
      return (await a.login(r)).split('; ').slice(1);
    };
    const https = { 'x-forwarded-proto': 'https' };
    expect(await attrs(auth, {})).toEqual([
      'HttpOnly',
      'SameSite=Strict',
      'Path=/',
      'Max-Age=3600',
    ]);
    expect(await attrs(auth, https)).toContain('Secure');
    expect(await attrs(auth, { 'x-forwarded-proto': 'http' })).not.toContain('Secure');
    expect(await attrs(auth, {}, true)).toContain('Secure');
    const always = new DashboardAuth({ token: 't', sessions, secureCookie: true });
    const never = new DashboardAuth({ token: 't', sessions, secureCookie: false });
    expect(await attrs(always, {})).toContain('Secure');
    expect(await attrs(never, https)).not.toContain('Secure');
    expect(await attrs(never, https)).toContain('HttpOnly');
  });

  it('serves only loopback Host names without a token (DNS rebinding)', () => {
    for (const host of ['localhost:8080', '127.0.0.1:1', '127.9.8.7', '[::1]:80', '[::1]']) {
      expect(isLocalHost(host), host).toBe(true);
    }
    for (const host of [
      '10.0.0.5',
      '10.0.0.5:8080',
      '0.0.0.0:80',
      '192.168.1.2',
      '[::]:80',
      '[fe80::1]:80',
      '[2001:db8::1]',
      '[::ffff:10.0.0.1]',
      'evil.example:8080',
      '127.0.0.1.nip.io',
      'localhost.evil.example',
    ]) {
      expect(isLocalHost(host), host).toBe(false);
    }
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
