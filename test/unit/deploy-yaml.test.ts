/**
 * deploy/: every compose and Kubernetes YAML file parses (CI cannot run Docker or a cluster
 * here) and says what the issue asks of it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { parseDuration } from '../../src/duration.js';
import { httpExposureProblem } from '../../src/http/exposure.js';
import { isLoopback } from '../../src/http/loopback.js';
import { ROOT } from '../helpers/worker-fixtures.js';

const DEPLOY = join(ROOT, 'deploy');

/** Every YAML file under deploy/compose and deploy/k8s. */
const yamlFiles = ['compose', 'k8s'].flatMap((dir) =>
  readdirSync(join(DEPLOY, dir), { recursive: true })
    .map(String)
    .filter((f) => /\.ya?ml$/.test(f))
    .map((f) => join(dir, f)),
);

type Doc = Record<string, unknown>;

/** Parses a YAML file into its documents; fails the test on any error or warning. */
function docsOf(file: string): Doc[] {
  // `merge`: Compose resolves `<<: *anchor` merge keys, and so must this reading.
  const docs = parseAllDocuments(readFileSync(join(DEPLOY, file), 'utf8'), { merge: true });
  return docs.map((d) => {
    expect(
      d.errors.map((e) => e.message),
      file,
    ).toEqual([]);
    expect(
      d.warnings.map((e) => e.message),
      file,
    ).toEqual([]);
    return d.toJS({ maxAliasCount: 100 }) as Doc;
  });
}

const at = (o: unknown, ...path: (string | number)[]): unknown =>
  path.reduce<unknown>((v, k) => (v as Record<string | number, unknown> | undefined)?.[k], o);

describe('deploy/ YAML', () => {
  it('finds the compose file and the Kubernetes files', () => {
    expect(yamlFiles).toContain(join('compose', 'docker-compose.yml'));
    expect(yamlFiles.filter((f) => f.startsWith('k8s')).length).toBeGreaterThanOrEqual(3);
  });

  it.each(yamlFiles)('%s parses without errors or warnings', (file) => {
    expect(docsOf(file).length).toBeGreaterThan(0);
  });

  describe('docker-compose.yml', () => {
    const compose = docsOf(join('compose', 'docker-compose.yml'))[0]!;
    const services = compose['services'] as Record<string, Doc>;

    it('runs 3 NATS nodes from server-2.10.conf, MinIO, 2 backends and workers', () => {
      const nats = Object.keys(services).filter((s) => s.startsWith('sonar-nats-'));
      expect(nats).toEqual(['sonar-nats-1', 'sonar-nats-2', 'sonar-nats-3']);
      for (const s of nats) {
        expect(services[s]!['command']).toEqual(['-c', '/etc/nats/server-2.10.conf', '--name', s]);
      }
      expect(services).toHaveProperty('minio');
      expect(at(services, 'backend', 'deploy', 'replicas')).toBe(2);
      expect(Number(at(services, 'worker', 'deploy', 'replicas'))).toBeGreaterThanOrEqual(1);
    });

    it('gives each Sonar service its own role and replicas 3', () => {
      const roles = { backend: 'backend', worker: 'worker', client: 'client' };
      for (const [service, role] of Object.entries(roles)) {
        const env = at(services, service, 'environment') as Record<string, string>;
        expect(env['SONAR_NATS_USER']).toBe(role);
        expect(env['SONAR_REPLICAS']).toBe('3');
        expect(env['SONAR_NATS_URL']).toContain('sonar-nats-3:4222');
      }
    });

    it('serves no dashboard beyond loopback without a token', () => {
      for (const [name, service] of Object.entries(services)) {
        const env = (service['environment'] ?? {}) as Record<string, string>;
        if (env['SONAR_HTTP_PORT'] === undefined) continue;
        const http = Object.fromEntries(
          Object.entries(env).filter(([k]) => /^SONAR_(HTTP_|DASHBOARD)/.test(k)),
        );
        expect(httpExposureProblem(loadConfig(http)), name).toBeNull();
      }
    });

    it('lets a worker drain before it is killed', () => {
      const env = at(services, 'worker', 'environment') as Record<string, string>;
      const grace = parseDuration(String(at(services, 'worker', 'stop_grace_period')));
      expect(grace).toBeGreaterThan(parseDuration(env['SONAR_DRAIN_GRACE']!));
    });
  });

  describe('Kubernetes', () => {
    const sonar = docsOf(join('k8s', 'sonar.yaml'));
    const deployment = (name: string): Doc =>
      sonar.find((d) => d['kind'] === 'Deployment' && at(d, 'metadata', 'name') === name)!;
    const envOf = (d: Doc): Record<string, string> =>
      Object.fromEntries(
        (
          at(d, 'spec', 'template', 'spec', 'containers', 0, 'env') as {
            name: string;
            value?: string;
          }[]
        )
          .filter((e) => e.value !== undefined)
          .map((e) => [e.name, e.value!]),
      );

    it('sets terminationGracePeriodSeconds above the drain grace, inside a 2-minute spot notice', () => {
      const worker = deployment('sonar-worker');
      const graceS = Number(
        at(worker, 'spec', 'template', 'spec', 'terminationGracePeriodSeconds'),
      );
      const drainMs = parseDuration(envOf(worker)['SONAR_DRAIN_GRACE']!);
      expect(graceS * 1_000).toBeGreaterThan(drainMs);
      expect(graceS).toBeLessThan(120);
    });

    it('runs 2 strict backends with replicas 3, each role with its own credential', () => {
      const backend = deployment('sonar-backend');
      expect(at(backend, 'spec', 'replicas')).toBe(2);
      expect(at(backend, 'spec', 'template', 'spec', 'containers', 0, 'args')).toContain(
        '--strict-durability',
      );
      const grace = Number(
        at(backend, 'spec', 'template', 'spec', 'terminationGracePeriodSeconds'),
      );
      expect(grace).toBeGreaterThan(10); // SONAR_STOP_GRACE's default, 10 s
      expect(envOf(backend)['SONAR_NATS_USER']).toBe('backend');
      expect(envOf(deployment('sonar-worker'))['SONAR_NATS_USER']).toBe('worker');
      const config = sonar.find((d) => d['kind'] === 'ConfigMap')!;
      expect(at(config, 'data', 'SONAR_REPLICAS')).toBe('3');
    });

    it('every container with HTTP probes binds beyond loopback with the token from a Secret (or probes only)', () => {
      const secrets = new Map(
        docsOf(join('k8s', 'secret.yaml'))
          .filter((d) => d['kind'] === 'Secret')
          .map((d) => [at(d, 'metadata', 'name') as string, at(d, 'stringData') as Doc]),
      );
      type Env = { name: string; value?: string; valueFrom?: Doc };
      const probed = sonar
        .filter((d) => d['kind'] === 'Deployment')
        .flatMap((d) => at(d, 'spec', 'template', 'spec', 'containers') as Doc[])
        .filter((c) =>
          ['readinessProbe', 'livenessProbe', 'startupProbe'].some(
            (p) => at(c, p, 'httpGet') !== undefined,
          ),
        );
      expect(probed.map((c) => c['name'])).toContain('backend');
      for (const c of probed) {
        const env = new Map(((c['env'] ?? []) as Env[]).map((e) => [e.name, e]));
        const host = env.get('SONAR_HTTP_HOST');
        const podIp = at(host?.valueFrom, 'fieldRef', 'fieldPath') === 'status.podIP';
        expect(
          podIp || (host?.value !== undefined && !isLoopback(host.value)),
          `${String(c['name'])} SONAR_HTTP_HOST`,
        ).toBe(true);
        expect(env.get('SONAR_HTTP_PORT')?.value).toBeDefined();
        if (env.get('SONAR_DASHBOARD')?.value === 'off') continue;
        const ref = at(env.get('SONAR_HTTP_TOKEN')?.valueFrom, 'secretKeyRef') as
          { name: string; key: string } | undefined;
        expect(ref, `${String(c['name'])} SONAR_HTTP_TOKEN from a secretKeyRef`).toBeDefined();
        expect(secrets.get(ref!.name)?.[ref!.key], `${ref!.name}/${ref!.key}`).toBeTruthy();
        // What the backend itself checks at start (src/http/exposure.ts).
        const config = loadConfig({
          SONAR_HTTP_PORT: env.get('SONAR_HTTP_PORT')!.value!,
          SONAR_HTTP_HOST: host?.value ?? '10.0.0.1',
          SONAR_HTTP_TOKEN: 'from-the-secret',
        });
        expect(httpExposureProblem(config)).toBeNull();
      }
    });

    it('the NATS chart values make a 3-node JetStream cluster that fsyncs every write', () => {
      const values = docsOf(join('k8s', 'nats-values.yaml'))[0]!;
      expect(at(values, 'config', 'cluster', 'replicas')).toBe(3);
      expect(at(values, 'config', 'jetstream', 'enabled')).toBe(true);
      expect(at(values, 'config', 'jetstream', 'merge', 'sync_interval')).toBe('always');
    });
  });
});
