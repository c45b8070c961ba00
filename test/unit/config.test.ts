import { describe, it, expect } from 'vitest';
import { names } from '../../streams/names.js';
import {
  ConfigError,
  configDefaults,
  configFlag,
  configVariables,
  isConfigError,
  loadConfig,
  redactConfig,
} from '../../src/config.js';
import type { SonarConfig } from '../../src/config.js';

/** Runs `fn`, expecting a ConfigError, and returns it. */
function refused(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err: unknown) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  describe('defaults', () => {
    it('resolves DESIGN.md §9 defaults to ms and bytes', () => {
      const expected: SonarConfig = {
        natsUrl: 'nats://127.0.0.1:4222',
        workerCredentialTtlMs: 3_600_000,
        prefix: 'sonar',
        tickMs: 2_000,
        publishTimeoutMs: 600_000,
        orphanAgeMs: 600_000,
        pulseIntervalMs: 5_000,
        pulseTtlMs: 15_000,
        recoveryLimit: 3,
        recoveryWindowMs: 72 * 3_600_000,
        capacityMultiplier: 1,
        dispatchBatch: 8,
        priorityAgingMs: 60_000,
        finalizers: 4,
        finalizeBatch: 64,
        finalizeLeaseMs: 30_000,
        finalizeMaxDeliver: 6,
        drainGraceMs: 20_000,
        spotMarginMs: 10_000,
        workerCommands: { kind: 'any' },
        maxOutputBytes: 64 * 1024 * 1024,
        maxInputBytes: 256 * 1024,
        maxOpenTasks: 100_000,
        lockTtlMs: 10_000,
        replicas: 1,
        eventsMaxBytes: 'auto',
        stagingMaxBytes: 1024 ** 3,
        logsMaxBytes: 256 * 1024 ** 2,
        dashboard: true,
        sessionTtlMs: 12 * 3_600_000,
        httpSecureCookie: 'auto',
        httpTrustedProxies: 0,
        retentionMs: 30 * 86_400_000,
        fullSweepMs: 3_600_000,
        stopGraceMs: 10_000,
        imdsUrl: 'http://169.254.169.254',
      };
      expect(loadConfig({})).toStrictEqual(expected);
    });

    it('leaves optional settings absent', () => {
      const config = loadConfig({});
      for (const key of [
        'natsCreds',
        'natsUser',
        'natsPassword',
        'natsTlsCa',
        'natsTlsCert',
        'natsTlsKey',
        'httpPort',
        's3',
      ]) {
        expect(config).not.toHaveProperty(key);
      }
    });

    it('treats empty values as unset', () => {
      const config = loadConfig({ SONAR_HTTP_PORT: '', SONAR_TICK: '  ', SONAR_NATS_USER: '' });
      expect(config).not.toHaveProperty('httpPort');
      expect(config).not.toHaveProperty('natsUser');
      expect(config.tickMs).toBe(2_000);
    });

    it('ignores variables it does not know', () => {
      expect(loadConfig({ PATH: '/bin', SONAR_UNKNOWN: 'x' })).toStrictEqual(loadConfig({}));
    });
  });

  describe('environment', () => {
    it('reads every variable', () => {
      const config = loadConfig({
        SONAR_NATS_URL: 'nats://a:4222,nats://b:4222',
        SONAR_NATS_CREDS: '/etc/sonar/user.creds',
        SONAR_NATS_USER: 'alice',
        SONAR_NATS_PASSWORD: 's3cret pass',
        SONAR_NATS_TLS_CA: '/etc/ssl/ca.pem',
        SONAR_NATS_TLS_CERT: '/etc/ssl/client.pem',
        SONAR_NATS_TLS_KEY: '/etc/ssl/client-key.pem',
        SONAR_PREFIX: 't_ab-1',
        SONAR_TICK: '250ms',
        SONAR_PUBLISH_TIMEOUT: '1m',
        SONAR_ORPHAN_AGE: '2m',
        SONAR_PULSE_INTERVAL: '1s',
        SONAR_PULSE_TTL: '3s',
        SONAR_RECOVERY_LIMIT: '5',
        SONAR_RECOVERY_WINDOW: '1d',
        SONAR_CAPACITY_MULTIPLIER: '1.5',
        SONAR_DISPATCH_BATCH: '16',
        SONAR_PRIORITY_AGING: '0',
        SONAR_TAG_RATES: 'api=20/s, gpu=0.5/m',
        SONAR_FINALIZERS: '2',
        SONAR_FINALIZE_LEASE: '45s',
        SONAR_FINALIZE_BATCH: '8',
        SONAR_FINALIZE_MAX_DELIVER: '10',
        SONAR_DRAIN_GRACE: '0s',
        SONAR_SPOT_MARGIN: '5s',
        SONAR_WORKER_COMMANDS: '/usr/bin/python3, echo',
        SONAR_MAX_OUTPUT: '1GiB',
        SONAR_MAX_INPUT: '512KiB',
        SONAR_MAX_OPEN_TASKS: '2500',
        SONAR_LOCK_TTL: '5s',
        SONAR_REPLICAS: '3',
        SONAR_EVENTS_MAX_BYTES: '8GiB',
        SONAR_STAGING_MAX_BYTES: '2GiB',
        SONAR_LOGS_MAX_BYTES: '64MiB',
        SONAR_HTTP_PORT: '8080',
        SONAR_DASHBOARD: 'off',
        SONAR_SESSION_TTL: '30m',
        SONAR_HTTP_SECURE_COOKIE: 'true',
        SONAR_HTTP_TRUSTED_PROXIES: '2',
        SONAR_RETENTION: '7d',
        SONAR_FULL_SWEEP: '30m',
        SONAR_STOP_GRACE: '4s',
        SONAR_IMDS_URL: 'http://127.0.0.1:1338/',
        SONAR_S3_ENDPOINT: 'http://127.0.0.1:9000',
        SONAR_S3_BUCKET: 'outputs',
        SONAR_S3_ACCESS_KEY: 'key',
        SONAR_S3_SECRET_KEY: 'secret',
      });
      expect(config).toStrictEqual({
        natsUrl: 'nats://a:4222,nats://b:4222',
        natsCreds: '/etc/sonar/user.creds',
        natsUser: 'alice',
        natsPassword: 's3cret pass',
        natsTlsCa: '/etc/ssl/ca.pem',
        natsTlsCert: '/etc/ssl/client.pem',
        natsTlsKey: '/etc/ssl/client-key.pem',
        workerCredentialTtlMs: 3_600_000,
        prefix: 't_ab-1',
        tickMs: 250,
        publishTimeoutMs: 60_000,
        orphanAgeMs: 120_000,
        pulseIntervalMs: 1_000,
        pulseTtlMs: 3_000,
        recoveryLimit: 5,
        recoveryWindowMs: 86_400_000,
        capacityMultiplier: 1.5,
        dispatchBatch: 16,
        priorityAgingMs: 0,
        tagRates: {
          api: { burst: 20, windowMs: 1_000, text: '20/s' },
          gpu: { burst: 1, windowMs: 120_000, text: '0.5/m' },
        },
        finalizers: 2,
        finalizeBatch: 8,
        finalizeLeaseMs: 45_000,
        finalizeMaxDeliver: 10,
        drainGraceMs: 0,
        spotMarginMs: 5_000,
        workerCommands: { kind: 'allow', executables: ['/usr/bin/python3', 'echo'] },
        maxOutputBytes: 1024 ** 3,
        maxInputBytes: 512 * 1024,
        maxOpenTasks: 2_500,
        lockTtlMs: 5_000,
        replicas: 3,
        eventsMaxBytes: 8 * 1024 ** 3,
        stagingMaxBytes: 2 * 1024 ** 3,
        logsMaxBytes: 64 * 1024 ** 2,
        httpPort: 8080,
        dashboard: false,
        sessionTtlMs: 1_800_000,
        httpSecureCookie: true,
        httpTrustedProxies: 2,
        retentionMs: 7 * 86_400_000,
        fullSweepMs: 1_800_000,
        stopGraceMs: 4_000,
        imdsUrl: 'http://127.0.0.1:1338',
        s3: {
          endpoint: 'http://127.0.0.1:9000',
          bucket: 'outputs',
          accessKey: 'key',
          secretKey: 'secret',
        },
      } satisfies SonarConfig);
    });

    it('accepts plain numbers as ms and bytes', () => {
      const config = loadConfig({ SONAR_TICK: '1500', SONAR_MAX_INPUT: '1024' });
      expect(config.tickMs).toBe(1_500);
      expect(config.maxInputBytes).toBe(1_024);
    });

    it.each([
      'nats://127.0.0.1:4222',
      'tls://nats.example.com:4443',
      'localhost:4222',
      'demo.nats.io',
    ])('accepts NATS URL %j', (url) => {
      expect(loadConfig({ SONAR_NATS_URL: url }).natsUrl).toBe(url);
    });

    it('accepts HTTP port 0 (any free port)', () => {
      expect(loadConfig({ SONAR_HTTP_PORT: '0' }).httpPort).toBe(0);
    });

    it('reads SONAR_TAG_RATES and names the variable and the bad item', () => {
      expect(loadConfig({}).tagRates).toBeUndefined();
      expect(loadConfig({ SONAR_TAG_RATES: '' }).tagRates ?? {}).toEqual({});
      expect(loadConfig({ SONAR_TAG_RATES: 'a=0/s,b=2.5/s' }).tagRates).toEqual({
        a: { burst: 0, windowMs: 1_000, text: '0/s' },
        b: { burst: 2, windowMs: 800, text: '2.5/s' },
      });
      expect(() => loadConfig({ SONAR_TAG_RATES: 'api=abc' })).toThrow(
        'SONAR_TAG_RATES: "api=abc" is not a rate: count/period (e.g. api=20/s, 1/m, 0.5/s, 40/2s)',
      );
      expect(() => loadConfig({ SONAR_TAG_RATES: 'api' })).toThrow(
        'SONAR_TAG_RATES: "api" is not tag=rate',
      );
      expect(() => loadConfig({ SONAR_TAG_RATES: 'api=1/s,api=2/s' })).toThrow(
        'SONAR_TAG_RATES: "api=2/s" gives tag api a second rate',
      );
      expect(() => loadConfig({ SONAR_TAG_RATES: 'api=20001/s' })).toThrow(
        'SONAR_TAG_RATES: "api=20001/s" allows a burst of 20001, more than the 10000',
      );
      expect(() => loadConfig({ SONAR_TAG_RATES: 'api=0.5/h' })).toThrow(
        'SONAR_TAG_RATES: "api=0.5/h" holds a token for 7200000 ms, longer than the 1h',
      );
    });

    it('reads the HTTP hardening settings and names a bad value', () => {
      expect(loadConfig({ SONAR_HTTP_SECURE_COOKIE: 'AUTO' }).httpSecureCookie).toBe('auto');
      expect(loadConfig({ SONAR_HTTP_SECURE_COOKIE: 'false' }).httpSecureCookie).toBe(false);
      expect(loadConfig({ SONAR_DASHBOARD: 'on' }).dashboard).toBe(true);
      expect(() => loadConfig({ SONAR_HTTP_SECURE_COOKIE: 'maybe' })).toThrow(
        'SONAR_HTTP_SECURE_COOKIE: "maybe" is not auto, true or false',
      );
      expect(() => loadConfig({ SONAR_SESSION_TTL: '0s' })).toThrow('SONAR_SESSION_TTL');
      expect(() => loadConfig({ SONAR_HTTP_TRUSTED_PROXIES: '-1' })).toThrow(
        'SONAR_HTTP_TRUSTED_PROXIES',
      );
    });
  });

  describe('overrides (CLI flags)', () => {
    it('win over the environment, keyed by variable, field or flag', () => {
      const config = loadConfig(
        {
          SONAR_TICK: '5s',
          SONAR_PREFIX: 'env',
          SONAR_PULSE_INTERVAL: '9s',
          SONAR_PULSE_TTL: '30s',
        },
        { SONAR_TICK: '1s', prefix: 'flag', pulseInterval: '2s', pulseTtlMs: 6_000 },
      );
      expect(config.tickMs).toBe(1_000);
      expect(config.prefix).toBe('flag');
      expect(config.pulseIntervalMs).toBe(2_000);
      expect(config.pulseTtlMs).toBe(6_000);
    });

    it('take numbers as ms and bytes', () => {
      const config = loadConfig({}, { tickMs: 250, maxOutputBytes: 4_096, replicas: 3 });
      expect(config.tickMs).toBe(250);
      expect(config.maxOutputBytes).toBe(4_096);
      expect(config.replicas).toBe(3);
    });

    it('ignore undefined values and unknown keys (commander opts)', () => {
      const opts: Partial<Record<string, string | number>> = { json: 'yes', tick: undefined };
      expect(loadConfig({ SONAR_TICK: '3s' }, opts).tickMs).toBe(3_000);
    });

    it('set S3 by flag', () => {
      const config = loadConfig(
        {},
        {
          s3Endpoint: 'https://s3.example.com',
          s3Bucket: 'b',
          's3.accessKey': 'a',
          SONAR_S3_SECRET_KEY: 's',
        },
      );
      expect(config.s3).toStrictEqual({
        endpoint: 'https://s3.example.com',
        bucket: 'b',
        accessKey: 'a',
        secretKey: 's',
      });
    });

    it('name the variable when refused', () => {
      const err = refused(() => loadConfig({}, { pulseInterval: '5x' }));
      expect(err.variable).toBe('SONAR_PULSE_INTERVAL');
      expect(err.value).toBe('5x');
    });
  });

  describe('bad values', () => {
    it('name the variable and the value', () => {
      const err = refused(() => loadConfig({ SONAR_PULSE_INTERVAL: '5x' }));
      expect(err.name).toBe('ConfigError');
      expect(err.message).toBe('SONAR_PULSE_INTERVAL: "5x" is not a duration (e.g. 5s)');
      expect(err.variable).toBe('SONAR_PULSE_INTERVAL');
      expect(err.value).toBe('5x');
      expect(isConfigError(err)).toBe(true);
      expect(isConfigError(new Error('x'))).toBe(false);
    });

    it.each([
      ['SONAR_NATS_URL', 'http://127.0.0.1:4222', 'is not a NATS URL'],
      ['SONAR_NATS_URL', 'nats://', 'is not a NATS URL'],
      ['SONAR_PREFIX', 'Sonar', 'is not a prefix'],
      ['SONAR_PREFIX', '1abc', 'is not a prefix'],
      ['SONAR_PREFIX', 'a.b', 'is not a prefix'],
      ['SONAR_PREFIX', 'a'.repeat(32), 'is not a prefix'],
      ['SONAR_TICK', '2 seconds', 'is not a duration (e.g. 5s)'],
      ['SONAR_TICK', '0s', 'must be more than 0'],
      ['SONAR_PUBLISH_TIMEOUT', '0', 'must be more than 0'],
      ['SONAR_ORPHAN_AGE', '-1m', 'is not a duration'],
      ['SONAR_PULSE_TTL', '15', 'must be more than SONAR_PULSE_INTERVAL (5s)'],
      ['SONAR_RECOVERY_LIMIT', '0', 'must be at least 1'],
      ['SONAR_RECOVERY_LIMIT', '2.5', 'is not a whole number'],
      ['SONAR_RECOVERY_WINDOW', '3 days', 'is not a duration'],
      ['SONAR_CAPACITY_MULTIPLIER', 'two', 'is not a number'],
      ['SONAR_CAPACITY_MULTIPLIER', '0', 'must be more than 0'],
      ['SONAR_DISPATCH_BATCH', '0', 'must be at least 1'],
      ['SONAR_FINALIZERS', 'many', 'is not a whole number'],
      ['SONAR_FINALIZE_LEASE', '0ms', 'must be more than 0'],
      ['SONAR_FINALIZE_MAX_DELIVER', '-1', 'is not a whole number'],
      ['SONAR_DRAIN_GRACE', '20sec', 'is not a duration'],
      ['SONAR_SPOT_MARGIN', 'soon', 'is not a duration'],
      ['SONAR_WORKER_COMMANDS', 'bin/sh', '"bin/sh" is not a command setting'],
      ['SONAR_WORKER_COMMANDS', '/bin/sh,,echo', 'entry 2 is empty'],
      ['SONAR_MAX_OUTPUT', '64MB', 'is not a size (e.g. 64MiB)'],
      ['SONAR_MAX_OUTPUT', '0', 'must be more than 0'],
      ['SONAR_MAX_INPUT', '256k', 'is not a size'],
      ['SONAR_MAX_OPEN_TASKS', '0', 'must be at least 1'],
      ['SONAR_MAX_OPEN_TASKS', '1e5', 'is not a whole number'],
      ['SONAR_LOCK_TTL', '1s', 'must be more than SONAR_TICK (2s)'],
      ['SONAR_REPLICAS', '7', 'must be at most 5'],
      ['SONAR_REPLICAS', '0', 'must be at least 1'],
      ['SONAR_EVENTS_MAX_BYTES', '8GB', 'is not a size or auto (e.g. 8GiB)'],
      ['SONAR_EVENTS_MAX_BYTES', '0', 'is not a size or auto'],
      ['SONAR_STAGING_MAX_BYTES', 'lots', 'is not a size'],
      ['SONAR_LOGS_MAX_BYTES', 'lots', 'is not a size'],
      ['SONAR_HTTP_PORT', '70000', 'is not a port'],
      ['SONAR_HTTP_PORT', 'http', 'is not a port'],
      ['SONAR_RETENTION', '1y', 'is not a duration'],
      ['SONAR_FULL_SWEEP', 'hourly', 'is not a duration'],
      ['SONAR_IMDS_URL', '169.254.169.254', 'is not an http(s) URL'],
      ['SONAR_S3_ENDPOINT', 'ftp://x', 'is not an http(s) URL'],
    ])('%s=%j is refused', (variable, value, problem) => {
      const err = refused(() =>
        loadConfig({
          [variable]: value,
          ...(variable.startsWith('SONAR_S3_') && {
            SONAR_S3_BUCKET: 'b',
            SONAR_S3_ACCESS_KEY: 'a',
            SONAR_S3_SECRET_KEY: 's',
          }),
        }),
      );
      expect(err.variable).toBe(variable);
      expect(err.value).toBe(value);
      expect(err.message).toContain(`${variable}: `);
      expect(err.message).toContain(problem);
    });

    it('quotes the value in the message', () => {
      expect(refused(() => loadConfig({ SONAR_REPLICAS: '7' })).message).toBe(
        'SONAR_REPLICAS: "7" must be at most 5',
      );
    });

    it('lists every problem, the first one in variable and value', () => {
      const err = refused(() => loadConfig({ SONAR_TICK: 'x', SONAR_REPLICAS: '9' }));
      expect(err.variable).toBe('SONAR_TICK');
      expect(err.problems.map((p) => p.variable)).toStrictEqual(['SONAR_TICK', 'SONAR_REPLICAS']);
      expect(err.message).toBe(
        'SONAR_TICK: "x" is not a duration (e.g. 5s); SONAR_REPLICAS: "9" must be at most 5',
      );
    });

    it('reports a cross-field problem against a default with the default value', () => {
      const err = refused(() => loadConfig({ SONAR_PULSE_INTERVAL: '20s' }));
      expect(err.variable).toBe('SONAR_PULSE_TTL');
      expect(err.value).toBe(configDefaults.SONAR_PULSE_TTL);
    });

    it('wants all four SONAR_S3_* or none', () => {
      const err = refused(() =>
        loadConfig({ SONAR_S3_ENDPOINT: 'http://127.0.0.1:9000', SONAR_S3_BUCKET: 'b' }),
      );
      expect(err.variable).toBe('SONAR_S3_ACCESS_KEY');
      expect(err.value).toBeUndefined();
      expect(err.message).toContain('SONAR_S3_ENDPOINT, SONAR_S3_BUCKET are set');
    });

    it('wants SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY both or neither', () => {
      const noKey = refused(() => loadConfig({ SONAR_NATS_TLS_CERT: '/etc/ssl/client.pem' }));
      expect(noKey.variable).toBe('SONAR_NATS_TLS_KEY');
      expect(noKey.value).toBeUndefined();
      expect(noKey.message).toBe(
        'SONAR_NATS_TLS_KEY: unset, but SONAR_NATS_TLS_CERT is set (set both for mutual TLS, or neither)',
      );
      const noCert = refused(() => loadConfig({ SONAR_NATS_TLS_KEY: '/etc/ssl/client-key.pem' }));
      expect(noCert.variable).toBe('SONAR_NATS_TLS_CERT');
      expect(noCert.message).toContain('but SONAR_NATS_TLS_KEY is set');
    });

    it('never puts a secret in the message', () => {
      const err = refused(() =>
        loadConfig({
          SONAR_NATS_PASSWORD: 'hunter2',
          SONAR_S3_SECRET_KEY: 'topsecret',
          SONAR_TICK: 'x',
        }),
      );
      expect(err.message).not.toContain('hunter2');
      expect(err.message).not.toContain('topsecret');
    });
  });
});

describe('configVariables', () => {
  it('lists the SONAR_* variables of DESIGN.md §9', () => {
    expect(configVariables).toHaveLength(59);
    expect(configVariables[0]).toBe('SONAR_NATS_URL');
    expect(configVariables.every((v) => v.startsWith('SONAR_'))).toBe(true);
  });

  it('maps each to a kebab-case flag', () => {
    expect(configFlag('SONAR_PULSE_INTERVAL')).toBe('pulse-interval');
    expect(configFlag('SONAR_S3_SECRET_KEY')).toBe('s3-secret-key');
  });
});

describe('redactConfig', () => {
  it('hides passwords and secret keys', () => {
    const config = loadConfig({
      SONAR_NATS_PASSWORD: 'hunter2',
      SONAR_S3_ENDPOINT: 'http://127.0.0.1:9000',
      SONAR_S3_BUCKET: 'b',
      SONAR_S3_ACCESS_KEY: 'a',
      SONAR_S3_SECRET_KEY: 'topsecret',
    });
    const shown = JSON.stringify(redactConfig(config));
    expect(shown).not.toContain('hunter2');
    expect(shown).not.toContain('topsecret');
    expect(redactConfig(loadConfig({}))).toStrictEqual(loadConfig({}));
  });
});

describe('SONAR_PREFIX', () => {
  it('has one rule: the settings and the names accept 31 characters and refuse 32', () => {
    const ok = `p${'a'.repeat(30)}`;
    const long = `${ok}a`;
    expect(loadConfig({ SONAR_PREFIX: ok }).prefix).toBe(ok);
    expect(names(ok).prefix).toBe(ok);
    expect(() => loadConfig({ SONAR_PREFIX: long })).toThrow(/SONAR_PREFIX: .* is not a prefix/);
    expect(() => names(long)).toThrow(/prefix must match/);
  });
});
