/**
 * examples/ as a user runs them, against the packed package (the tarball package-install
 * installs too), a real nats-server and the installed `sonar backend`:
 * - examples/typescript: its package.json installed, `npm run build` (tsc, strict) against
 *   the package's types, with the README's SDK quickstart compiled beside its sources, then
 *   its worker and its client to a run that succeeded;
 * - examples/shell-worker: its README's `sonar worker` and `sonar submit --wait` with the
 *   installed bin, to the end, and the script's outputs read back with `sonar results`.
 * One install serves both: the shell example needs only the bin, which the TypeScript
 * project's install holds.
 */
import { execFile, spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  installedVersion,
  npmInstall,
  packedTarball,
  pkg,
  ROOT,
  startInstalledWorld,
} from '../helpers/packed-package.js';
import type { InstalledWorld } from '../helpers/packed-package.js';

const run = promisify(execFile);
const EXAMPLES = join(ROOT, 'examples');

interface ExamplePackage {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  scripts: Record<string, string>;
}

/** The `ts` code blocks of the README's "SDK quickstart" section, in order. */
function readmeQuickstart(readme: string): string[] {
  const start = readme.indexOf('## SDK quickstart');
  expect(start, 'README has no "## SDK quickstart" section').toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

let dir: string;
let project: string;
let bin: string;
let world: InstalledWorld | undefined;
let env: NodeJS.ProcessEnv;

/** A long-running child of the test, killed in afterAll if it is still running. */
function start(command: string, args: string[], cwd: string) {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  world!.own(child);
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  return { child, exited, output: () => out };
}

/** Runs a command to its end; a failure carries its output and the backend's log. */
async function runToEnd(command: string, args: string[], cwd: string, timeout = 60_000) {
  try {
    return await run(command, args, { cwd, env, timeout, maxBuffer: 16 * 1024 * 1024 });
  } catch (err: unknown) {
    const e = err as { message: string; stdout?: string; stderr?: string };
    throw new Error(
      `${[command, ...args].join(' ')} failed: ${e.message}\n${e.stdout}\n${e.stderr}\nbackend:\n${world?.backendLog().slice(-4000)}`,
    );
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sonar-examples-'));
  project = join(dir, 'typescript');
  await cp(join(EXAMPLES, 'typescript'), project, { recursive: true });
  // The example's package.json as it is, but the package comes from the tarball, and every
  // other dependency at the version this checkout installed, so the install needs no network
  // (the example's ranges must still admit it: same major).
  const manifestPath = join(project, 'package.json');
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as ExamplePackage;
  expect(manifest.dependencies[pkg.name]).toBe(`^${pkg.version}`);
  manifest.dependencies[pkg.name] = `file:${await packedTarball()}`;
  for (const deps of [manifest.dependencies, manifest.devDependencies]) {
    for (const [name, range] of Object.entries(deps)) {
      if (name === pkg.name) continue;
      const version = installedVersion(name);
      expect(range.replace(/^[~^]/, '').split('.')[0], `${name} ${range}`).toBe(
        version.split('.')[0],
      );
      deps[name] = version;
    }
  }
  await writeFile(manifestPath, JSON.stringify(manifest, null, 2));
  await npmInstall(project);
  bin = join(project, 'node_modules', '.bin', 'sonar');

  world = await startInstalledWorld(bin, dir, `ex${Date.now().toString(36)}`);
  env = world.env;
}, 180_000);

afterAll(async () => {
  await world?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('examples/', () => {
  it('typescript: type-checks against the installed package, and its worker and client run a run to success', async () => {
    // The README's SDK quickstart (its worker, then its client) is compiled with the project,
    // so the snippets a reader copies cannot drift from the package's types.
    const quickstart = readmeQuickstart(await readFile(join(ROOT, 'README.md'), 'utf8'));
    expect(quickstart).toHaveLength(2);
    await writeFile(join(project, 'src', 'readme-worker.ts'), quickstart[0]!);
    await writeFile(join(project, 'src', 'readme-client.ts'), quickstart[1]!);
    // `npm run build` is tsc -p tsconfig.json (strict) with the project's own TypeScript.
    await runToEnd('npm', ['run', '--silent', 'build'], project, 90_000);

    const worker = start(process.execPath, ['dist/worker.js'], project);
    const client = await runToEnd(process.execPath, ['dist/client.js', 'words-ts'], project);
    expect(client.stdout).toContain('submitted words-ts: 4 tasks');
    expect(client.stdout).toContain('run words-ts Succeeded: {"Succeeded":4}');
    // The report step summed what the count step stored: 8 + 4 + 10 words.
    expect(client.stdout).toContain('report.sum {"texts":3,"words":22,"longest":"disposable"}');
    expect(client.stdout).toContain('count.t1 {"words":4,"longest":"routing"}');

    // SIGTERM drains the worker (run()); it exits 0 once drained.
    worker.child.kill('SIGTERM');
    expect(await worker.exited, worker.output()).toBe(0);
  }, 150_000);

  it('shell-worker: its README commands run with the sonar bin to the end', async () => {
    const example = join(dir, 'shell-worker');
    await cp(join(EXAMPLES, 'shell-worker'), example, { recursive: true });
    const readme = await readFile(join(example, 'README.md'), 'utf8');
    const workerArgs = ['worker', '--tags', 'shell', '--slots', '2', '--commands', 'none'];
    const script = ['--', './count-words.sh'];
    const runFile = JSON.parse(await readFile(join(example, 'run.json'), 'utf8')) as {
      runId: string;
    };
    // What this test runs is what the README tells a user to run.
    for (const command of [
      `npx sonar ${[...workerArgs, ...script].join(' ')}`,
      'npx sonar submit run.json --wait',
      `npx sonar results ${runFile.runId} --json`,
    ]) {
      expect(readme).toContain(command);
    }

    const worker = start(bin, [...workerArgs, ...script], example);
    const submit = await runToEnd(bin, ['submit', 'run.json', '--wait'], example);
    expect(submit.stdout).toContain(`run ${runFile.runId} Succeeded`);
    const results = await runToEnd(bin, ['results', runFile.runId, '--json'], example);
    const outputs = Object.fromEntries(
      (JSON.parse(results.stdout) as { results: { taskId: string; json: unknown }[] }).results.map(
        (r) => [r.taskId, r.json],
      ),
    );
    expect(outputs).toEqual({
      hamlet: { task: 'hamlet', words: 6 },
      caesar: { task: 'caesar', words: 3 },
      fox: { task: 'fox', words: 9 },
    });

    worker.child.kill('SIGTERM');
    expect(await worker.exited, worker.output()).toBe(0);
  }, 90_000);
});
