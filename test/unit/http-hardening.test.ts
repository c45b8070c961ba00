import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { clientAddress } from '../../src/http/dashboard/client-address.js';
import { LoginLimiter } from '../../src/http/dashboard/login-limiter.js';
import { safeNext } from '../../src/http/dashboard/safe-next.js';
import { httpExposureProblem } from '../../src/http/exposure.js';
import { isLoopback } from '../../src/http/loopback.js';

describe('isLoopback', () => {
  it('is true for localhost, 127.0.0.0/8 and ::1 in any spelling', () => {
    for (const h of ['localhost', 'LOCALHOST', '127.0.0.1', '127.255.0.9', '::1', '[::1]']) {
      expect(isLoopback(h), h).toBe(true);
    }
    for (const h of ['0:0:0:0:0:0:0:1', '::0:1', '::ffff:127.0.0.1']) {
      expect(isLoopback(h), h).toBe(true);
    }
  });

  it('is false for every other address and name', () => {
    for (const h of [
      '0.0.0.0',
      '::',
      '10.1.2.3',
      '128.0.0.1',
      '1::',
      '1::1',
      'fe80::1',
      '::ffff:10.0.0.1',
      '::2',
      'example.com',
      '127.0.0.1.nip.io',
      '',
    ]) {
      expect(isLoopback(h), h).toBe(false);
    }
  });
});

describe('httpExposureProblem', () => {
  const problem = (env: Record<string, string>) =>
    httpExposureProblem(loadConfig({ SONAR_HTTP_PORT: '8080', ...env }));

  it('refuses a dashboard beyond loopback without a token, naming both settings', () => {
    for (const host of ['0.0.0.0', '10.0.0.7', '::', 'sonar.internal']) {
      const p = problem({ SONAR_HTTP_HOST: host });
      expect(p?.variable, host).toBe('SONAR_HTTP_HOST');
      expect(p?.message).toContain('SONAR_HTTP_TOKEN is unset');
      expect(p?.message).toContain('SONAR_DASHBOARD=off');
      expect(p?.message).not.toContain('\n');
    }
  });

  it('allows loopback, a token, probes-only mode, or no HTTP port at all', () => {
    expect(problem({})).toBeNull();
    expect(problem({ SONAR_HTTP_HOST: '127.0.0.2' })).toBeNull();
    expect(problem({ SONAR_HTTP_HOST: '::1' })).toBeNull();
    expect(problem({ SONAR_HTTP_HOST: 'localhost' })).toBeNull();
    expect(problem({ SONAR_HTTP_HOST: '0.0.0.0', SONAR_HTTP_TOKEN: 't' })).toBeNull();
    expect(problem({ SONAR_HTTP_HOST: '0.0.0.0', SONAR_DASHBOARD: 'off' })).toBeNull();
    expect(httpExposureProblem(loadConfig({ SONAR_HTTP_HOST: '0.0.0.0' }))).toBeNull();
  });
});

describe('safeNext', () => {
  it('keeps a path on this origin', () => {
    for (const next of ['/', '/runs', '/runs/r1?x=1&y=%2F', '/events#top', '/a/b/']) {
      expect(safeNext(next), next).toBe(next);
    }
  });

  it('gives / for anything that could leave this origin', () => {
    for (const next of [
      null,
      '',
      '/\t/evil.com',
      '/\n/evil.com',
      '/\r/evil.com',
      '/ /evil.com',
      '/\x00/evil.com',
      '/\x7f',
      '//evil.com',
      '//evil.com/x',
      '/\\evil.com',
      '/\\\\evil.com',
      '/a\\b',
      '\\/evil.com',
      'https://evil.com',
      'evil.com',
      'javascript:alert(1)',
      '/runs\u2028',
      '/caf\u00e9',
    ]) {
      expect(safeNext(next), JSON.stringify(next)).toBe('/');
    }
  });
});

describe('LoginLimiter', () => {
  const limiter = (clock: { t: number }) =>
    new LoginLimiter({ failures: 10, perMs: 60_000, maxAddresses: 100, now: () => clock.t });

  it('refuses the 11th failure within a minute, per address only', () => {
    const clock = { t: 0 };
    const l = limiter(clock);
    for (let i = 0; i < 10; i++) {
      expect(l.retryAfterMs('10.0.0.1'), `attempt ${i + 1}`).toBe(0);
      l.failed('10.0.0.1');
      clock.t += 5_000;
    }
    // 10 failures from t=0 to t=45s: the 11th attempt, at t=50s, waits until t=60s.
    expect(l.retryAfterMs('10.0.0.1')).toBe(10_000);
    expect(l.retryAfterMs('10.0.0.2')).toBe(0);
    clock.t = 60_000;
    expect(l.retryAfterMs('10.0.0.1')).toBe(0); // the first failure left the window
    l.failed('10.0.0.1');
    expect(l.retryAfterMs('10.0.0.1')).toBe(5_000); // the second leaves at 65s
  });

  it('forgets the least recent addresses beyond its bound', () => {
    const clock = { t: 0 };
    const l = limiter(clock);
    for (let i = 0; i < 10; i++) l.failed('victim');
    expect(l.retryAfterMs('victim')).toBe(60_000);
    for (let i = 0; i < 100; i++) l.failed(`a${i}`);
    expect(l.retryAfterMs('victim')).toBe(0);
    expect(l.retryAfterMs('a99')).toBe(0);
  });
});

describe('clientAddress', () => {
  const r = (xff?: string) =>
    ({
      headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
      socket: { remoteAddress: '10.9.9.9' },
    }) as unknown as IncomingMessage;

  it('ignores X-Forwarded-For unless proxies are trusted', () => {
    expect(clientAddress(r('1.1.1.1'), 0)).toBe('10.9.9.9');
  });

  it('takes the entry the nearest trusted proxy appended, never the client-written ones', () => {
    expect(clientAddress(r('6.6.6.6, 1.1.1.1'), 1)).toBe('1.1.1.1');
    expect(clientAddress(r('6.6.6.6, 1.1.1.1, 2.2.2.2'), 2)).toBe('1.1.1.1');
    expect(clientAddress(r('1.1.1.1'), 2)).toBe('1.1.1.1');
    expect(clientAddress(r(), 1)).toBe('10.9.9.9');
  });
});
