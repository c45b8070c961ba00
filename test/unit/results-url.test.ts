import { describe, expect, it } from 'vitest';
import { isConfigError, loadConfig, redactConfig } from '../../src/config.js';
import { classifyPgError, describePgError } from '../../src/storage/postgres/pg-errors.js';
import { maskResultsUrl, parseResultsUrl } from '../../src/storage/postgres/pg-url.js';

const refusal = (value: string): { message: string; value: unknown } => {
  try {
    loadConfig({ SONAR_RESULTS_URL: value });
  } catch (err: unknown) {
    if (isConfigError(err)) return { message: err.message, value: err.value };
    throw err;
  }
  throw new Error(`${value} was accepted`);
};

describe('SONAR_RESULTS_URL', () => {
  it('is unset by default: the KV sink', () => {
    expect(loadConfig({}).resultsUrl).toBeUndefined();
  });

  it('takes a postgres:// or postgresql:// URL, sslmode included', () => {
    const url = 'postgres://sonar:pw@db:5432/sonar?sslmode=verify-full';
    expect(loadConfig({ SONAR_RESULTS_URL: url }).resultsUrl).toBe(url);
    expect(parseResultsUrl('postgresql://db/sonar')).toBe('postgresql://db/sonar');
  });

  it('refuses another scheme, naming the setting, with the password masked', () => {
    const { message, value } = refusal('mysql://sonar:hunter2@db/sonar');
    expect(message).toMatch(/^SONAR_RESULTS_URL: "mysql:\/\/sonar:\*\*\*@db\/sonar"/);
    expect(message).toContain('postgres://');
    expect(message).not.toContain('hunter2');
    expect(value).not.toContain('hunter2');
  });

  it('refuses an unknown sslmode', () => {
    const { message } = refusal('postgres://sonar:hunter2@db/sonar?sslmode=always');
    expect(message).toContain('sslmode "always" is not one of disable, allow, prefer, require');
    expect(message).not.toContain('hunter2');
  });

  it('masks the password of a value that does not even parse', () => {
    const { message } = refusal('postgres://sonar:hunt er2@');
    expect(message).not.toContain('hunt er2');
    expect(maskResultsUrl('postgres://u:p@ss:w0rd@db/x')).not.toContain('w0rd');
  });

  it('masks a password given as a parameter, and one holding an @', () => {
    const { message } = refusal('postgres://sonar@db/sonar?password=hunter2&sslmode=always');
    expect(message).not.toContain('hunter2');
    expect(maskResultsUrl('postgres://sonar@db/sonar?sslpassword=k3y&password=hunter2')).toBe(
      'postgres://sonar@db/sonar?sslpassword=***&password=***',
    );
    expect(maskResultsUrl('postgres://u:p@ss@db/x')).toBe('postgres://u:***@db/x');
    expect(maskResultsUrl('postgres://u:p@s s@db/x?password=x y')).not.toMatch(/s s|x y/);
    const config = loadConfig({ SONAR_RESULTS_URL: 'postgres://sonar@db/sonar?password=hunter2' });
    expect(redactConfig(config).resultsUrl).not.toContain('hunter2');
  });

  it('is masked when the configuration is logged', () => {
    const config = loadConfig({ SONAR_RESULTS_URL: 'postgres://sonar:hunter2@db/sonar' });
    expect(redactConfig(config).resultsUrl).toBe('postgres://sonar:***@db/sonar');
  });
});

describe('classifyPgError', () => {
  const dbError = (code: string) => Object.assign(new Error('boom'), { code });

  it('connection failures and shutdowns pause the pool', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', '08006', '57P01', '57P03', '28P01']) {
      expect(classifyPgError(dbError(code)), code).toBe('unavailable');
    }
    expect(classifyPgError(new Error('Connection terminated unexpectedly'))).toBe('unavailable');
    expect(classifyPgError(new Error('timeout exceeded when trying to connect'))).toBe(
      'unavailable',
    );
  });

  it('data and constraint errors (classes 22 and 23) are refused rows', () => {
    for (const code of ['22P02', '22P05', '23505', '23514', '23502']) {
      expect(classifyPgError(dbError(code)), code).toBe('rejected');
    }
  });

  it('a server that cannot write now pauses the pool too: read-only, full, cancelled, a grant or the table missing', () => {
    for (const code of ['25006', '53100', '53200', '55P03', '57014', '42501', '42P01']) {
      expect(classifyPgError(dbError(code)), code).toBe('unavailable');
    }
  });

  it('anything else takes the usual retries', () => {
    for (const code of ['40001', '40P01', '42703', 'XX000']) {
      expect(classifyPgError(dbError(code)), code).toBe('retry');
    }
  });
});

describe('describePgError', () => {
  it("keeps the database's message and SQLSTATE, but not a refused row's contents", () => {
    const err = Object.assign(new Error('new row violates check constraint "c"'), {
      code: '23514',
      detail: 'Failing row contains (r1, t1, {"secret": "output"}).',
    });
    expect(describePgError(err)).toBe('new row violates check constraint "c" (SQLSTATE 23514)');
    const long = Object.assign(new Error('boom'), { code: '23505', detail: 'x'.repeat(1000) });
    expect(describePgError(long).length).toBeLessThan(300);
  });
});
