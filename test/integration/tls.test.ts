/**
 * TLS for real: scripts/dev-ca.sh makes a CA and certificates in a temp dir, nats-servers run
 * the shipped deploy/nats/tls.conf and cluster-tls.conf (their /etc/nats/certs paths pointed
 * at that dir), and Sonar connects with connectNats from SONAR_NATS_TLS_* settings.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { loadConfig } from '../../src/config.js';
import { connectNats } from '../../src/nats.js';
import { startNatsCluster } from '../helpers/nats-cluster.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { eventually } from '../helpers/eventually.js';
import { perFile } from '../helpers/per-file.js';
import { inTempRoot } from '../helpers/temp-root.js';
import { killAll, runSonar, spawnSonar } from '../helpers/sonar-process.js';
import { NO_IMDS, ROOT } from '../helpers/worker-fixtures.js';

const run = promisify(execFile);
const DEV_CA = join(ROOT, 'scripts', 'dev-ca.sh');

/** A shipped deploy/nats fragment with its certificate paths pointed at `certs`. */
async function fragment(certs: string, name: string): Promise<string> {
  const text = await readFile(join(ROOT, 'deploy', 'nats', name), 'utf8');
  return text.replaceAll('/etc/nats/certs/', `${certs}/`);
}

/**
 * A JetStream server whose config is `body` (written to `<dir>/<name>.conf`, its includes
 * beside it).
 */
async function serverWith(dir: string, name: string, body: string): Promise<NatsServer> {
  const config = join(dir, `${name}.conf`);
  const storeDir = join(dir, `${name}-js`);
  await writeFile(config, `jetstream { store_dir: ${JSON.stringify(storeDir)} }\n${body}`);
  return startNatsServer({ config, storeDir });
}

/** Connects one-shot with the settings `env` gives, as any Sonar process reads them. */
function sonarConnect(env: Record<string, string>): Promise<NatsConnection> {
  return connectNats(loadConfig(env), { life: 'one-shot' });
}

/** The SonarError a connection attempt fails with. */
async function refusal(attempt: Promise<NatsConnection>): Promise<SonarError> {
  const err = await attempt.then(
    async (nc) => {
      await nc.close();
      throw new Error('expected the connection to be refused');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SonarError);
  return err as SonarError;
}

/** Shows a connection works: a request answered through the server. */
async function roundTrip(nc: NatsConnection): Promise<void> {
  const sub = nc.subscribe('tls.echo', {
    callback: (_e, m) => {
      m.respond(m.data);
    },
  });
  const reply = await nc.request('tls.echo', 'ping', { timeout: 2_000 });
  expect(reply.string()).toBe('ping');
  sub.unsubscribe();
}

/**
 * The INFO a node sends on its route port. A TLS route port starts with the handshake (INFO
 * comes after it), so this dials TLS as a node does: with the CA and a node's certificate.
 */
async function routeInfo(certs: string, port: number): Promise<Record<string, unknown>> {
  const [ca, cert, key] = await Promise.all(
    ['ca.pem', 'server.pem', 'server-key.pem'].map((f) => readFile(join(certs, f))),
  );
  const socket = tlsConnect({ host: '127.0.0.1', port, ca, cert, key, servername: 'localhost' });
  try {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    const line = chunk.toString('utf8').split('\r\n')[0]!;
    expect(line).toMatch(/^INFO /);
    return JSON.parse(line.slice('INFO '.length)) as Record<string, unknown>;
  } finally {
    socket.destroy();
  }
}

/** The file's certificates (scripts/dev-ca.sh) and its three servers. */
interface TlsServers {
  dir: string;
  certs: string;
  /** Client port with TLS (deploy/nats/tls.conf as shipped). */
  tls: NatsServer;
  /** The same with `verify: true`: mutual TLS. */
  mutual: NatsServer;
  /** No TLS at all. */
  plain: NatsServer;
  stop(): Promise<void>;
}

const startTlsServers = (): Promise<TlsServers> =>
  inTempRoot('sonar-tls', async (dir) => {
    const certs = join(dir, 'certs');
    await run(DEV_CA, ['--client', certs]);
    await writeFile(join(dir, 'tls.conf'), await fragment(certs, 'tls.conf'));
    const mutualConf = (await fragment(certs, 'tls.conf')).replace(
      '# verify: true',
      'verify: true',
    );
    expect(mutualConf).toContain('\n  verify: true');
    await writeFile(join(dir, 'mutual-tls.conf'), mutualConf);
    const results = await Promise.allSettled([
      serverWith(dir, 'server-tls', 'include ./tls.conf\n'),
      serverWith(dir, 'server-mutual', 'include ./mutual-tls.conf\n'),
      startNatsServer(),
    ]);
    const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const stop = async () => {
      await Promise.all(started.map((server) => server.stop()));
    };
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) {
      await stop();
      throw failed.reason;
    }
    const [tls, mutual, plain] = started as [NatsServer, NatsServer, NatsServer];
    return { dir, certs, tls, mutual, plain, stop };
  });

const servers = perFile('tlsServers', startTlsServers, (s) => s.stop());
/** The dev CA's certificate: what SONAR_NATS_TLS_CA names. */
const ca = () => join(servers().certs, 'ca.pem');

afterAll(async () => {
  await killAll();
});

describe('scripts/dev-ca.sh', () => {
  it('keeps keys private and is idempotent', async () => {
    for (const key of ['ca-key.pem', 'server-key.pem', 'client-key.pem']) {
      expect(((await stat(join(servers().certs, key))).mode & 0o777).toString(8)).toBe('600');
    }
    const before = await readFile(join(servers().certs, 'server.pem'), 'utf8');
    const again = await run(DEV_CA, ['--client', servers().certs]);
    expect(again.stdout).toContain('kept');
    expect(again.stdout).not.toContain('wrote');
    expect(await readFile(join(servers().certs, 'server.pem'), 'utf8')).toBe(before);
  });
});

describe('client port with TLS', () => {
  it('connects with SONAR_NATS_TLS_CA', async () => {
    const nc = await sonarConnect({ SONAR_NATS_URL: servers().tls.url, SONAR_NATS_TLS_CA: ca() });
    try {
      expect(nc.info?.tls_required).toBe(true);
      await roundTrip(nc);
    } finally {
      await nc.close();
    }
  });

  it('connects with a tls:// URL and the CA', async () => {
    const nc = await sonarConnect({
      SONAR_NATS_URL: `tls://127.0.0.1:${servers().tls.port}`,
      SONAR_NATS_TLS_CA: ca(),
    });
    await roundTrip(nc);
    await nc.close();
  });

  it('is refused without the CA, with one line saying why', async () => {
    const err = await refusal(sonarConnect({ SONAR_NATS_URL: servers().tls.url }));
    expect(err.code).toBe(ErrorCode.Unavailable);
    expect(err.message).not.toContain('\n');
    expect(err.message).toMatch(
      /^cannot reach NATS at nats:\/\/127\.0\.0\.1:\d+: TLS: the server's certificate is not trusted \(.+\): set SONAR_NATS_TLS_CA to the CA that signed it$/,
    );
  });

  it('never falls back to plain text: a CA or a tls:// URL refuses a server without TLS', async () => {
    const withCa = await refusal(
      sonarConnect({ SONAR_NATS_URL: servers().plain.url, SONAR_NATS_TLS_CA: ca() }),
    );
    expect(withCa.code).toBe(ErrorCode.Unavailable);
    expect(withCa.message).toContain("server does not support 'tls'");
    const withScheme = await refusal(
      sonarConnect({ SONAR_NATS_URL: `tls://127.0.0.1:${servers().plain.port}` }),
    );
    expect(withScheme.message).toContain("server does not support 'tls'");
  });

  it('names the setting whose file cannot be read', async () => {
    const missing = join(servers().dir, 'nope.pem');
    const err = await refusal(
      sonarConnect({ SONAR_NATS_URL: servers().tls.url, SONAR_NATS_TLS_CA: missing }),
    );
    expect(err.code).toBe(ErrorCode.Validation);
    expect(err.message).toBe(`SONAR_NATS_TLS_CA: cannot read ${JSON.stringify(missing)} (ENOENT)`);
  });
});

describe('client port with mutual TLS (verify: true)', () => {
  it('refuses a client without a certificate, with one line', async () => {
    const err = await refusal(
      sonarConnect({ SONAR_NATS_URL: servers().mutual.url, SONAR_NATS_TLS_CA: ca() }),
    );
    expect(err.code).toBe(ErrorCode.Unavailable);
    expect(err.message).not.toContain('\n');
    // The server's alert, or the reset of the socket it closed: which one comes first is a race.
    expect(err.message).toMatch(
      /^cannot reach NATS at \S+: (TLS: the server refused this client \(.+\): a server with mutual TLS needs SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY, signed by a CA it trusts|read ECONNRESET)$/,
    );
  });

  it('accepts SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY', async () => {
    const nc = await sonarConnect({
      SONAR_NATS_URL: servers().mutual.url,
      SONAR_NATS_TLS_CA: ca(),
      SONAR_NATS_TLS_CERT: join(servers().certs, 'client.pem'),
      SONAR_NATS_TLS_KEY: join(servers().certs, 'client-key.pem'),
    });
    await roundTrip(nc);
    await nc.close();
  });

  it('refuses half a certificate pair before dialling (settings given directly)', async () => {
    const err = await refusal(
      connectNats({
        natsUrl: servers().mutual.url,
        natsTlsCa: ca(),
        natsTlsCert: join(servers().certs, 'client.pem'),
      }),
    );
    expect(err.code).toBe(ErrorCode.Validation);
    expect(err.message).toContain('SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY');
  });
});

describe('sonar processes with mutual TLS', () => {
  const envOf = (withClientCert: boolean): Record<string, string> => ({
    SONAR_NATS_URL: servers().mutual.url,
    SONAR_NATS_TLS_CA: ca(),
    ...(withClientCert && {
      SONAR_NATS_TLS_CERT: join(servers().certs, 'client.pem'),
      SONAR_NATS_TLS_KEY: join(servers().certs, 'client-key.pem'),
    }),
    SONAR_IMDS_URL: NO_IMDS,
  });

  it('a backend and a CLI verb connect with the settings; without the client certificate a verb fails in one line', async () => {
    const backend = spawnSonar('tls backend', ['backend'], envOf(true));
    await eventually(() => /backend started/.test(backend.stderr()) || !backend.running, {
      timeoutMs: 30_000,
      message: 'the backend starts over mutual TLS',
    });
    expect(backend.running, backend.stderr()).toBe(true);

    const ok = await runSonar('tls export', ['export'], envOf(true));
    expect(ok.code, ok.stderr).toBe(0);

    const refused = await runSonar('tls export without cert', ['export'], envOf(false));
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toMatch(/^sonar: cannot reach NATS at [^\n]+$/);
    await backend.kill();
  });
});

describe('cluster routes with TLS (deploy/nats/cluster-tls.conf)', () => {
  it('a 2-node cluster forms over TLS routes and replicates a stream', async () => {
    const cluster = await startNatsCluster({
      size: 2,
      clusterConfig: await fragment(servers().certs, 'cluster-tls.conf'),
    });
    try {
      // startNatsCluster waited for a JetStream meta leader: with 2 nodes that needs both,
      // so the route between them is up. A stream with 2 replicas shows it carries data.
      const nc = await connect({ servers: cluster.urls, reconnect: false });
      try {
        const jsm = await jetstreamManager(nc);
        const info = await jsm.streams.add({
          name: 'TLS_R2',
          subjects: ['tls.r2'],
          num_replicas: 2,
        });
        expect(info.config.num_replicas).toBe(2);
        expect(info.cluster?.replicas?.length).toBe(1);
      } finally {
        await nc.close();
      }
      // Each route port speaks TLS, and announces that it takes nothing else.
      for (const node of cluster.servers) {
        expect(await routeInfo(servers().certs, node.clusterPort)).toMatchObject({
          tls_required: true,
        });
      }
      expect(cluster.servers.map((n) => n.logs()).join('\n')).not.toMatch(/TLS.*error/i);
    } finally {
      await cluster.stop();
    }
  });
});
