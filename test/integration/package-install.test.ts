/**
 * The package as a user gets it: `npm pack`, then `npm install <tarball>` into a fresh project
 * that has no tsx and no TypeScript loader, and then
 * - a plain `.mjs` program imports the SDK, starts a worker and submits a run, against a real
 *   nats-server and the installed `sonar backend`, and sees the run succeed;
 * - `tsc --noEmit` on a consumer of the exported types: one file compiles clean, one with a
 *   deliberate type error is refused;
 * - the installed bin answers `--version` (the package's) and `--help`.
 * The tarball and the offline install are test/helpers/packed-package.ts's (the examples test
 * installs the same tarball). dist/ was built by vitest's globalSetup.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_JS_OPTIONS, appJs } from '../../src/http/dashboard/assets/app-js.js';
import {
  cleanEnv,
  installedVersion,
  npmInstall,
  packedTarball,
  pkg,
  ROOT,
  TSC,
  startInstalledWorld,
} from '../helpers/packed-package.js';
import type { InstalledWorld } from '../helpers/packed-package.js';

const run = promisify(execFile);

let dir: string;
let project: string;
let bin: string;
let world: InstalledWorld | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sonar-pack-'));
  project = join(dir, 'consumer');
  await mkdir(project);
  await writeFile(
    join(project, 'package.json'),
    JSON.stringify({ name: 'sonar-consumer', private: true, type: 'module' }),
  );
  await npmInstall(project, [
    await packedTarball(),
    `@types/node@${installedVersion('@types/node')}`,
  ]);
  bin = join(project, 'node_modules', '.bin', 'sonar');
}, 150_000);

afterAll(async () => {
  await world?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('the packed package, installed', () => {
  it('ships dist/, bin/, docs/, README, CHANGELOG and LICENSE, and no sources, tests or build state', async () => {
    const installed = join(project, 'node_modules', ...pkg.name.split('/'));
    const top = (await readdir(installed)).sort();
    expect(top).toEqual([
      'CHANGELOG.md',
      'LICENSE',
      'README.md',
      'bin',
      'dist',
      'docs',
      'package.json',
    ]);
    const dist = await readdir(join(installed, 'dist'), { recursive: true });
    expect(dist).toContain(join('src', 'index.d.ts'));
    expect(dist).toContain(join('src', 'http', 'dashboard', 'browser', 'app.js'));
    expect(
      dist.filter(
        (f) => /\.test\.|\.tsbuildinfo|build-stamp|\.ts$/.test(f) && !f.endsWith('.d.ts'),
      ),
    ).toEqual([]);
    // Nothing that could load TypeScript at run time.
    for (const loader of ['tsx', 'typescript', 'esbuild', 'ts-node']) {
      expect(existsSync(join(project, 'node_modules', loader)), loader).toBe(false);
    }
  });

  it('the bin prints the package version and its help', async () => {
    const [version, help] = await Promise.all([
      run(bin, ['--version'], { cwd: project, env: cleanEnv() }),
      run(bin, ['--help'], { cwd: project, env: cleanEnv() }),
    ]);
    expect(version.stdout.trim()).toBe(pkg.version);
    expect(help.stdout).toMatch(/^Usage: sonar /);
    expect(help.stdout).toContain('backend');
    expect(help.stdout).toContain('-V, --version');
  });

  it('a plain .mjs program runs a worker and a run through the SDK, against `sonar backend`', async () => {
    world = await startInstalledWorld(bin, project, `pkg${Date.now().toString(36)}`);
    const { env, backend } = world;

    await writeFile(
      join(project, 'main.mjs'),
      `import { createWorker, SonarClient, NonRetryableError } from '${pkg.name}';
const natsUrl = process.env.SONAR_NATS_URL;
const prefix = process.env.SONAR_PREFIX;
if (typeof NonRetryableError !== 'function') throw new Error('NonRetryableError is not exported');
const worker = createWorker({
  tags: ['pkg'],
  slots: 1,
  connection: { natsUrl },
  prefix,
  spot: false,
  handler: (input) => ({ doubled: input.n * 2 }),
});
await worker.start();
const client = await SonarClient.connect({ natsUrl }, { prefix });
const submitted = await client.submit({
  runId: 'pkg-run',
  steps: [{ id: 's', tags: ['pkg'], tasks: [{ id: 't0', input: { n: 21 } }] }],
});
const deadline = Date.now() + 30_000;
let status = await client.status('pkg-run');
while (!['Succeeded', 'Failed', 'Cancelled'].includes(status.state) && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 100));
  status = await client.status('pkg-run');
}
console.log(JSON.stringify({ submitted, status }));
await worker.drain();
await client.close();
process.exit(status.state === 'Succeeded' ? 0 : 1);
`,
    );
    const program = await run(process.execPath, ['main.mjs'], {
      cwd: project,
      env,
      timeout: 50_000,
    }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(
        `main.mjs failed: ${err.message}\n${err.stdout}\n${err.stderr}\nbackend:\n${world?.backendLog().slice(-4000)}`,
      );
    });
    const out = JSON.parse(program.stdout.trim().split('\n').at(-1)!) as {
      submitted: { runId: string; taskCount: number };
      status: { state: string; tasks: Record<string, number> };
    };
    expect(out.submitted).toEqual({ runId: 'pkg-run', taskCount: 1 });
    expect(out.status).toMatchObject({ state: 'Succeeded', tasks: { Succeeded: 1 } });

    // The handler's output, as the installed CLI reads it back.
    const results = await run(bin, ['results', 'pkg-run', '--json'], { cwd: project, env });
    const [result] = (JSON.parse(results.stdout) as { results: { base64: string }[] }).results;
    expect(JSON.parse(Buffer.from(result!.base64, 'base64').toString())).toEqual({ doubled: 42 });

    backend.kill('SIGTERM');
    await new Promise((resolve) => backend.once('exit', resolve));
  });

  it('the exported types: a correct consumer compiles clean, a wrong one is refused', async () => {
    // skipLibCheck: checking every dependency's .d.ts (zod, minio, pino...) takes minutes on a
    // loaded machine; the refused file below proves that the package's types resolve (an
    // unresolved type would be `any` and accept it).
    await writeFile(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
        },
        files: ['good.ts', 'bad.ts'],
      }),
    );
    await writeFile(
      join(project, 'good.ts'),
      `import { createWorker, SonarClient, NonRetryableError, SonarError, validateRunFile } from '${pkg.name}';
import type { HandlerContext, RunFile, RunStatus, TaskHandler, WorkerOptions } from '${pkg.name}';
import type { Projection } from '${pkg.name}/actors';

const handler: TaskHandler = (input: unknown, ctx: HandlerContext) => {
  if (ctx.signal.aborted) throw new NonRetryableError('aborted');
  const taskId: string = ctx.taskId;
  return { input, taskId, attempt: ctx.attempt + 1 };
};
const options: WorkerOptions = { tags: ['gpu'], slots: 2, handler, spot: false };
export const worker = createWorker(options);
export const file: RunFile = { runId: 'r1', steps: [{ id: 's', tags: ['gpu'], tasks: [{ id: 't0' }] }] };
validateRunFile(file, { maxInputBytes: 64 * 1024 });
export async function state(client: SonarClient): Promise<RunStatus['state']> {
  return (await client.status('r1')).state;
}
export const isSonar = (e: unknown): boolean => e instanceof SonarError;
export type Tasks = Projection['tasks'];
`,
    );
    await writeFile(
      join(project, 'bad.ts'),
      `import { createWorker } from '${pkg.name}';
import type { HandlerContext } from '${pkg.name}';

export const worker = createWorker({ tags: 'gpu', handler: () => 1 });
export const attempt = (ctx: HandlerContext): string => ctx.attempt;
`,
    );
    // One program, two files: good.ts has no error of its own, bad.ts exactly its two.
    const tsc = await run(process.execPath, [TSC, '-p', 'tsconfig.json', '--pretty', 'false'], {
      cwd: project,
      env: cleanEnv(),
    }).then(
      (r) => ({ code: 0, out: r.stdout }),
      (err: { code: number; stdout: string }) => ({ code: err.code, out: err.stdout }),
    );
    expect(tsc.out.split('\n').filter((l) => l.startsWith('good.ts'))).toEqual([]);
    expect(tsc.code).toBe(2);
    const errors = tsc.out.trim().split('\n');
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(
      /^bad\.ts\(4,\d+\): error TS2322: Type 'string' is not assignable to type 'string\[\]'/,
    );
    expect(errors[1]).toMatch(
      /^bad\.ts\(5,\d+\): error TS2322: Type 'number' is not assignable to type 'string'/,
    );
  }, 90_000);
});

describe('the build', () => {
  it('prebuilt the dashboard script exactly as the server transpiles it from the sources', () => {
    const prebuilt = readFileSync(
      join(ROOT, 'dist', 'src', 'http', 'dashboard', 'browser', 'app.js'),
      'utf8',
    );
    expect(APP_JS_OPTIONS.format).toBe('iife');
    expect(appJs().text).toBe(prebuilt);
  });

  it("deploy/Dockerfile's ENTRYPOINT passes bin/sonar.js's Node flags", () => {
    const shebang = readFileSync(join(ROOT, pkg.bin['sonar']!), 'utf8').split('\n')[0]!;
    const binFlags = shebang
      .replace(/^#!\/usr\/bin\/env -S node\s*/, '')
      .split(/\s+/)
      .filter(Boolean);
    const dockerfile = readFileSync(join(ROOT, 'deploy', 'Dockerfile'), 'utf8');
    const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
    expect(binFlags).toContain('--heap-growing-percent=20');
    expect(entrypoint).toEqual(['node', ...binFlags, 'bin/sonar.js']);
  });
});
