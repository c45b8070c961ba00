/**
 * The dashboard's hardening against real backends on one nats-server: sessions shared
 * through the `sessions` bucket (a logout on one backend holds on another; a session ends
 * with SONAR_SESSION_TTL), the Secure cookie behind TLS, failed logins limited per client
 * address, probes-only mode, and a backend process refusing an open dashboard on the network.
 */
import { request } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { call, startDashboardBackend } from '../helpers/dashboard-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { spawnSonar } from '../helpers/sonar-process.js';
import { freshPrefix } from '../helpers/topology.js';

const TOKEN = 'hardening-test-token-0123456789';

const nats = serverPerFile();
const started: TestBackend[] = [];

afterAll(async () => {
  for (const b of started) await b.stop();
});

async function backend(env: Record<string, string>): Promise<TestBackend> {
  const b = await startDashboardBackend(nats.server.url, nats.nc, { env });
  started.push(b);
  return b;
}

const form = (fields: Record<string, string>, headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  body: new URLSearchParams(fields).toString(),
});

/** Logs in on `b`; returns the whole Set-Cookie value. */
async function login(b: TestBackend, headers: Record<string, string> = {}): Promise<string> {
  const res = await call(`${b.url}/login`, form({ token: TOKEN, next: '/runs' }, headers));
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toBe('/runs');
  return res.headers.get('set-cookie')!;
}

const withCookie = (setCookie: string) => ({ headers: { cookie: setCookie.split(';')[0]! } });

describe('dashboard sessions in the shared bucket', () => {
  it('a login on one backend works on another; a logout on one is refused on both', async () => {
    const prefix = freshPrefix();
    const a = await backend({ SONAR_PREFIX: prefix, SONAR_HTTP_TOKEN: TOKEN });
    const b = await backend({ SONAR_PREFIX: prefix, SONAR_HTTP_TOKEN: TOKEN });
    const cookie = await login(a);
    expect(cookie).toMatch(/^sonar_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\//);
    expect(cookie).toContain('Max-Age=43200'); // SONAR_SESSION_TTL's default, 12h
    const other = await login(a);
    expect(other.split(';')[0]).not.toBe(cookie.split(';')[0]); // random ids, not a token HMAC

    expect((await call(`${b.url}/api/overview`, withCookie(cookie))).status).toBe(200);
    expect((await call(`${b.url}/runs`, withCookie(cookie))).status).toBe(200);

    const out = await call(`${a.url}/logout`, { method: 'POST', ...withCookie(cookie) });
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toMatch(/^sonar_session=;.*Max-Age=0/);

    for (const url of [a.url, b.url]) {
      expect((await call(`${url}/api/overview`, withCookie(cookie))).status).toBe(401);
      const page = await call(`${url}/runs`, withCookie(cookie));
      expect(page.status).toBe(303);
      expect(page.headers.get('location')).toBe('/login?next=%2Fruns');
    }
    // Logging out again (an ended session) still clears the cookie.
    const again = await call(`${b.url}/logout`, { method: 'POST', ...withCookie(cookie) });
    expect(again.status).toBe(303);
    expect(again.headers.get('set-cookie')).toMatch(/^sonar_session=;.*Max-Age=0/);
    // Another session of the same user is untouched.
    expect((await call(`${b.url}/api/overview`, withCookie(other))).status).toBe(200);
  });

  it('a session ends after SONAR_SESSION_TTL, on the server side', async () => {
    const b = await backend({ SONAR_HTTP_TOKEN: TOKEN, SONAR_SESSION_TTL: '1s' });
    const cookie = await login(b);
    expect(cookie).toContain('Max-Age=1');
    expect((await call(`${b.url}/api/overview`, withCookie(cookie))).status).toBe(200);
    await eventually(
      async () => (await call(`${b.url}/api/overview`, withCookie(cookie))).status === 401,
      { timeoutMs: 5_000 },
    );
    expect((await call(`${b.url}/`, withCookie(cookie))).headers.get('location')).toBe(
      '/login?next=%2F',
    );
  });

  it('marks the cookie Secure when the login came through TLS (X-Forwarded-Proto)', async () => {
    const b = await backend({ SONAR_HTTP_TOKEN: TOKEN });
    expect(await login(b, { 'x-forwarded-proto': 'https' })).toMatch(
      /HttpOnly; SameSite=Strict; Path=\/; Secure; Max-Age=/,
    );
    expect(await login(b)).not.toContain('Secure');
    const always = await backend({ SONAR_HTTP_TOKEN: TOKEN, SONAR_HTTP_SECURE_COOKIE: 'true' });
    expect(await login(always)).toContain('; Secure');
  });
});

describe('failed logins', () => {
  const fail = (b: TestBackend, headers: Record<string, string>) =>
    call(`${b.url}/login`, form({ token: 'wrong', next: '/' }, headers));

  it('the 11th failure within a minute from one address is 429; another address logs in', async () => {
    const b = await backend({ SONAR_HTTP_TOKEN: TOKEN, SONAR_HTTP_TRUSTED_PROXIES: '1' });
    const attacker = { 'x-forwarded-for': '198.51.100.1, 203.0.113.7' };
    for (let i = 0; i < 10; i++) {
      const res = await fail(b, attacker);
      expect(res.status, `failure ${i + 1}`).toBe(303);
      expect(res.headers.get('location')).toBe('/login?failed=1&next=%2F');
    }
    const refused = await fail(b, attacker);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.json.error.code).toBe('too_many_requests');
    // The right token from that address is refused too: a guess past the limit learns nothing.
    const right = await call(`${b.url}/login`, form({ token: TOKEN, next: '/' }, attacker));
    expect(right.status).toBe(429);
    expect(right.headers.get('set-cookie')).toBeNull();
    // So is a bearer token from it, on the API.
    const bearer = { ...attacker, authorization: `Bearer ${TOKEN}` };
    expect((await call(`${b.url}/api/overview`, { headers: bearer })).status).toBe(429);

    // Another client behind the same proxy logs in at once.
    const colleague = { 'x-forwarded-for': '198.51.100.1, 203.0.113.8' };
    expect(await login(b, colleague)).toMatch(/^sonar_session=/);
  });

  it('wrong bearer tokens count as failed logins of their address', async () => {
    const b = await backend({ SONAR_HTTP_TOKEN: TOKEN, SONAR_HTTP_TRUSTED_PROXIES: '1' });
    const headers = { 'x-forwarded-for': '203.0.113.9', authorization: 'Bearer nope' };
    for (let i = 0; i < 10; i++) {
      expect((await call(`${b.url}/api/overview`, { headers })).status).toBe(401);
    }
    expect((await call(`${b.url}/api/overview`, { headers })).status).toBe(429);
    const ok = { 'x-forwarded-for': '203.0.113.10', authorization: `Bearer ${TOKEN}` };
    expect((await call(`${b.url}/api/overview`, { headers: ok })).status).toBe(200);
  });

  it('without trusted proxies X-Forwarded-For is ignored: a forged one does not escape', async () => {
    const b = await backend({ SONAR_HTTP_TOKEN: TOKEN });
    for (let i = 0; i < 10; i++) {
      expect((await fail(b, { 'x-forwarded-for': `203.0.113.${i}` })).status).toBe(303);
    }
    expect((await fail(b, { 'x-forwarded-for': '203.0.113.99' })).status).toBe(429);
  });
});

describe('probes-only mode (SONAR_DASHBOARD=off)', () => {
  /** GET with a Host header of our choosing (fetch will not send another one). */
  const get = (url: string, host: string) =>
    new Promise<number>((resolve, reject) => {
      const req = request(url, { headers: { host } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });

  it('serves /metrics, /healthz and /readyz to any Host without a token; all else is 404', async () => {
    const b = await backend({ SONAR_DASHBOARD: 'off' });
    const host = '10.1.2.3:8080'; // as a kubelet probing the pod IP sends it
    expect(await get(`${b.url}/metrics`, host)).toBe(200);
    expect(await get(`${b.url}/healthz`, host)).toBe(200);
    await eventually(async () => (await get(`${b.url}/readyz`, host)) === 200);
    for (const path of ['/', '/login', '/runs', '/api/overview', '/api/stream', '/assets/app.js']) {
      expect(await get(`${b.url}${path}`, host), path).toBe(404);
      expect(await get(`${b.url}${path}`, 'localhost'), path).toBe(404);
    }
    const post = await call(`${b.url}/api/runs/r1/cancel`, { method: 'POST' });
    expect(post.status).toBe(404);
  });
});

describe('sonar backend', () => {
  it('refuses to start a dashboard beyond loopback without a token, in one clear line', async () => {
    const p = spawnSonar('open-dashboard', ['backend'], {
      SONAR_NATS_URL: nats.server.url,
      SONAR_PREFIX: freshPrefix(),
      SONAR_HTTP_PORT: '0',
      SONAR_HTTP_HOST: '0.0.0.0',
      SONAR_HTTP_TOKEN: '',
    });
    const exit = await p.exited;
    expect(exit.code).not.toBe(0);
    expect(exit.code).toBe(2);
    const lines = p.stderr().trim().split('\n');
    expect(lines).toEqual([
      'sonar: SONAR_HTTP_HOST: "0.0.0.0" is not a loopback address and SONAR_HTTP_TOKEN is unset: the dashboard would be open to the network (set SONAR_HTTP_TOKEN, or SONAR_DASHBOARD=off to serve only /metrics, /healthz and /readyz)',
    ]);
  });
});
