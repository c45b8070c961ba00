/**
 * deploy/: every compose and Kubernetes YAML file parses (CI cannot run Docker or a cluster
 * here) and says what the issue asks of it. Secure mode: the NATS servers trust the
 * resolver.conf `sonar creds init` makes (operator mode, full resolver), and each Sonar
 * process sees its own role's files only: backends their creds, the worker signing key, the
 * operator signing key and the SYS creds; workers the bootstrap creds; no passwords.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
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

/** The settings that name a credential file, and the file of `sonar creds init` each takes. */
const BACKEND_FILES = {
  SONAR_NATS_CREDS: 'backend.creds',
  SONAR_WORKER_SIGNING_KEY: 'worker-signing.nk',
  SONAR_WORKER_ACCOUNT_JWT: 'workers-account.jwt',
  SONAR_NATS_OPERATOR_SIGNING_KEY: 'operator-signing.nk',
  SONAR_NATS_SYS_CREDS: 'sys.creds',
} as const;
const CREDENTIAL_SETTINGS = Object.keys(BACKEND_FILES);

/**
 * What a Sonar process of `role` must be given: its settings' files. A role is the CLI verb
 * a container runs (`backend`, `worker`, `workers`) or, for CLI tools, `client`/`operator`.
 */
function expectedFiles(role: string): Record<string, string> {
  switch (role) {
    case 'backend':
      return { ...BACKEND_FILES };
    case 'worker':
      return { SONAR_NATS_CREDS: 'bootstrap.creds' };
    case 'workers':
      return { SONAR_NATS_CREDS: 'supervisor.creds' };
    default:
      return { SONAR_NATS_CREDS: `${role}.creds` };
  }
}

/**
 * Checks one Sonar process: each credential setting points at its role's file, and the
 * files it can see (`visible`: path -> file name) are exactly those, no one else's.
 */
function expectOwnCredentials(
  label: string,
  role: string,
  env: Record<string, string | undefined>,
  visible: Map<string, string>,
): void {
  const want = expectedFiles(role);
  const given = Object.fromEntries(
    CREDENTIAL_SETTINGS.filter((k) => env[k] !== undefined).map((k) => [k, visible.get(env[k]!)]),
  );
  expect(given, `${label}: its credential settings and the files they name`).toEqual(want);
  expect([...visible.values()].sort(), `${label}: every credential file it can read`).toEqual(
    Object.values(want).sort(),
  );
  expect(env['SONAR_NATS_USER'], `${label}: SONAR_NATS_USER`).toBeUndefined();
  expect(env['SONAR_NATS_PASSWORD'], `${label}: SONAR_NATS_PASSWORD`).toBeUndefined();
}

/** `--resolver-dir X` of the `sonar creds init` command in `text`. */
const resolverDirIn = (text: string): string | undefined =>
  text.match(/creds init \S+ --resolver-dir (\S+)/)?.[1];

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

    it('gives each Sonar service replicas 3 and the whole cluster', () => {
      for (const service of ['backend', 'worker', 'client', 'operator']) {
        const env = at(services, service, 'environment') as Record<string, string>;
        expect(env['SONAR_REPLICAS'], service).toBe('3');
        expect(env['SONAR_NATS_URL'], service).toContain('sonar-nats-3:4222');
      }
    });

    // The `creds` service's script: `creds init` once, then `cp FILE... DIR/` per role.
    const script = String(at(services, 'creds', 'command', 0));
    /** Each creds volume and the files the script copies into it. */
    const volumeFiles = new Map<string, string[]>();
    const credsMounts = (at(services, 'creds', 'volumes') as string[]).map((v) => v.split(':'));
    for (const line of script.split('\n')) {
      const words = line.trim().split(/\s+/);
      if (words[0] !== 'cp') continue;
      const dir = words.at(-1)!.replace(/\/$/, '');
      const volume = credsMounts.find(([, path]) => path === `/creds/${dir}`)?.[0];
      expect(volume, `a volume for /creds/${dir}`).toBeDefined();
      volumeFiles.set(
        volume!,
        words.slice(1, -1).map((f) => f.replace(/^all\//, '')),
      );
    }
    /** What a service can read of the credentials: path -> file name. */
    const visibleIn = (service: string): Map<string, string> => {
      const out = new Map<string, string>();
      for (const mount of (at(services, service, 'volumes') ?? []) as string[]) {
        const [volume, path] = mount.split(':');
        expect(volume, `${service} mounts the volume with every key`).not.toBe('creds-all');
        for (const f of volumeFiles.get(volume!) ?? []) out.set(`${path}/${f}`, f);
      }
      return out;
    };

    it('makes the credentials once with sonar creds init, into a volume no other service mounts', () => {
      expect(script).toMatch(/^test -f all\/resolver\.conf \|\| node \S+ creds init all /m);
      expect(credsMounts).toContainEqual(['creds-all', '/creds/all']);
      for (const [name, service] of Object.entries(services)) {
        if (name === 'creds') continue;
        const volumes = ((service['volumes'] ?? []) as string[]).map((v) => v.split(':')[0]);
        expect(volumes, name).not.toContain('creds-all');
      }
    });

    it('every NATS node includes resolver.conf (and nothing else of the credentials), with a resolver dir of its own', () => {
      const conf = readFileSync(join(DEPLOY, 'nats', 'server-2.10.conf'), 'utf8');
      expect(conf).toMatch(/^include \.\/creds\/resolver\.conf$/m);
      const resolverDir = resolverDirIn(script)!;
      expect(resolverDir).toMatch(/^\/data\//);
      const dataVolumes = new Set<string>();
      for (const node of ['sonar-nats-1', 'sonar-nats-2', 'sonar-nats-3']) {
        expect([...visibleIn(node)]).toEqual([['/etc/nats/creds/resolver.conf', 'resolver.conf']]);
        const data = (at(services, node, 'volumes') as string[]).find((v) => v.endsWith(':/data'));
        expect(data, `${node} has its own /data (store and resolver dir)`).toBeDefined();
        dataVolumes.add(data!);
      }
      expect(dataVolumes.size).toBe(3);
    });

    it("each Sonar service reads only its own role's credential files, and no password", () => {
      for (const [name, service] of Object.entries(services)) {
        if (service['image'] !== 'sonar:local' || name === 'creds') continue;
        const command = (service['command'] ?? []) as string[];
        const role = ['backend', 'worker', 'workers'].includes(command[0]!) ? command[0]! : name;
        const env = service['environment'] as Record<string, string>;
        expectOwnCredentials(name, role, env, visibleIn(name));
      }
      expect(Object.keys(services)).toEqual(expect.arrayContaining(['client', 'operator']));
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

    it('runs 2 strict backends with replicas 3', () => {
      const backend = deployment('sonar-backend');
      expect(at(backend, 'spec', 'replicas')).toBe(2);
      expect(at(backend, 'spec', 'template', 'spec', 'containers', 0, 'args')).toContain(
        '--strict-durability',
      );
      const grace = Number(
        at(backend, 'spec', 'template', 'spec', 'terminationGracePeriodSeconds'),
      );
      expect(grace).toBeGreaterThan(10); // SONAR_STOP_GRACE's default, 10 s
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

    // secret.yaml's comments: the `sonar creds init` and `kubectl create` commands.
    const secretText = readFileSync(join(DEPLOY, 'k8s', 'secret.yaml'), 'utf8');
    const commands = secretText
      .split('\n')
      .filter((l) => l.startsWith('#'))
      .map((l) => l.replace(/^#\s?/, ''))
      .join('\n')
      .replace(/\\\n\s*/g, ' ');
    /** Each Secret or ConfigMap the comments make, and the file names it holds. */
    const made = new Map<string, string[]>();
    for (const m of commands.matchAll(
      /kubectl create (?:secret generic|configmap) (\S+)((?:\s+--from-file=\S+)+)/g,
    )) {
      made.set(
        m[1]!,
        [...m[2]!.matchAll(/--from-file=(\S+)/g)].map((f) => f[1]!.split('/').at(-1)!),
      );
    }

    it('the NATS chart runs operator mode with a full resolver, trusting what sonar creds init made', () => {
      const values = docsOf(join('k8s', 'nats-values.yaml'))[0]!;
      const resolver = at(values, 'config', 'resolver') as Doc;
      expect(resolver['enabled']).toBe(true);
      expect(at(resolver, 'merge', 'type')).toBe('full');
      expect(at(resolver, 'merge', 'allow_delete')).toBe(false);
      // resolver.conf names the chart's resolver dir (each pod's own PVC).
      expect(resolverDirIn(commands)).toBe(resolver['dir']);
      // config.merge includes resolver.conf from a volume the NATS container mounts...
      const merge = at(values, 'config', 'merge') as Doc;
      const includes = Object.entries(merge).filter(([k]) => k.endsWith('$include'));
      expect(includes).toHaveLength(1);
      const path = posix.resolve('/etc/nats-config', String(includes[0]![1]));
      type Mount = { name: string; mountPath: string };
      const mounts = ((at(values, 'container', 'patch') ?? []) as { value: Mount }[]).map(
        (p) => p.value,
      );
      const mount = mounts.find((m) => path.startsWith(`${m.mountPath}/`));
      expect(mount, `a mount holding ${path}`).toBeDefined();
      // ...a ConfigMap made from resolver.conf and nothing else.
      const volumes = ((at(values, 'podTemplate', 'patch') ?? []) as { value: Doc }[]).map(
        (p) => p.value,
      );
      const volume = volumes.find((v) => v['name'] === mount!.name);
      const configMap = String(at(volume, 'configMap', 'name'));
      expect(made.get(configMap)).toEqual([posix.basename(path)]);
      expect(posix.basename(path)).toBe('resolver.conf');
      // No users or passwords of the old scheme.
      expect(merge).not.toHaveProperty('accounts');
      expect(merge).not.toHaveProperty('authorization');
      expect(at(values, 'container', 'env')).toBeUndefined();
    });

    it("each Sonar Deployment mounts only its own role's Secret, and no password", () => {
      const deployments = sonar.filter((d) => d['kind'] === 'Deployment');
      expect(deployments.length).toBeGreaterThanOrEqual(2);
      type Env = { name: string; value?: string; valueFrom?: Doc };
      type Mount = { name: string; mountPath: string };
      for (const d of deployments) {
        const spec = at(d, 'spec', 'template', 'spec') as Doc;
        const volumes = (spec['volumes'] ?? []) as Doc[];
        for (const c of spec['containers'] as Doc[]) {
          const label = `${String(at(d, 'metadata', 'name'))}/${String(c['name'])}`;
          const visible = new Map<string, string>();
          for (const m of (c['volumeMounts'] ?? []) as Mount[]) {
            const volume = volumes.find((v) => v['name'] === m.name);
            const secret = at(volume, 'secret', 'secretName') as string | undefined;
            if (secret === undefined) continue;
            expect(made.has(secret), `${label}: secret.yaml says how to make ${secret}`).toBe(true);
            for (const f of made.get(secret)!) visible.set(`${m.mountPath}/${f}`, f);
          }
          const envList = (c['env'] ?? []) as Env[];
          for (const e of envList) {
            expect(at(e.valueFrom, 'secretKeyRef', 'name'), `${label} ${e.name}`).not.toBe(
              'sonar-nats-users',
            );
          }
          const env = Object.fromEntries(envList.map((e) => [e.name, e.value]));
          const role = String((c['args'] as string[])[0]);
          expectOwnCredentials(label, role, env, visible);
        }
      }
      // The backend's Secret holds exactly what it needs; the worker's only bootstrap.creds.
      expect(made.get('sonar-worker-creds')).toEqual(['bootstrap.creds']);
      expect(made.get('sonar-backend-creds')!.sort()).toEqual(Object.values(BACKEND_FILES).sort());
    });
  });
});
