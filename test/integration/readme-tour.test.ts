/**
 * The README's five-minute tour, run as a reader runs it: every command of the `sh` blocks of
 * its "Five-minute tour" section, in order, in a shell, from the checkout (where `npx sonar`
 * runs this package's own bin: npm links the checkout into its npx cache). Each must exit 0. A command that cannot run as written is in
 * TREATMENTS, with how the test runs it and why; each of those must still be in the tour, so
 * the list cannot outlive the README. The tour starts its own `sonar dev`: a nats-server, a
 * backend and three supervised workers, here on a free port.
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { cleanEnv, ROOT } from '../helpers/packed-package.js';
import { runSonar } from '../helpers/sonar-process.js';

const run = promisify(execFile);
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const SCRIPTS = (
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  }
).scripts;

/** The commands of the tour's `sh` blocks, in order, each without its trailing comment. */
function tourCommands(readme: string): string[] {
  const start = readme.indexOf('\n## Five-minute tour\n');
  expect(start, 'README has no "## Five-minute tour" section').toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  const commands: string[] = [];
  for (const block of section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    for (const line of block[1]!.split('\n')) {
      const command = line.replace(/\s+#.*$/, '').trim();
      if (command !== '') commands.push(command);
    }
  }
  return commands;
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One command in a shell of its own process group, as a terminal runs it. */
interface Shell {
  child: ChildProcess;
  output: () => string;
  exited: Promise<Exit>;
}

const shells = new Set<Shell>();
let env: NodeJS.ProcessEnv = {
  ...cleanEnv(),
  // `npx` must run this checkout's bin, never fetch a package called `sonar`.
  npm_config_yes: 'false',
};

function shell(command: string): Shell {
  const child = spawn('sh', ['-c', command], {
    cwd: ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const s: Shell = { child, output: () => out, exited };
  shells.add(s);
  void exited.then(() => shells.delete(s));
  return s;
}

/** Runs a command to its end; it must exit 0. */
async function runToEnd(command: string, timeoutMs = 120_000): Promise<string> {
  const s = shell(command);
  const timer = setTimeout(() => process.kill(-s.child.pid!, 'SIGKILL'), timeoutMs);
  const exit = await s.exited;
  clearTimeout(timer);
  expect(exit, `\`${command}\`:\n${s.output().slice(-4000)}`).toEqual({ code: 0, signal: null });
  return s.output();
}

/** Every process below `root` (its children, theirs...), with its command line. */
async function descendants(root: number): Promise<{ pid: number; args: string }[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,ppid=,args=']);
  const rows = stdout
    .trim()
    .split('\n')
    .map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l)!)
    .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[3]! }));
  const found: { pid: number; args: string }[] = [];
  const walk = (parent: number): void => {
    for (const r of rows.filter((row) => row.ppid === parent)) {
      found.push(r);
      walk(r.pid);
    }
  };
  walk(root);
  return found;
}

/** Rethrows a failed wait with what the shell printed so far. */
const withOutput =
  (s: Shell) =>
  (err: unknown): never => {
    throw new Error(`${(err as Error).message}\n${s.output().slice(-4000)}`);
  };

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * Ctrl-C for a long-running command (started with `exec`, so that the shell is the command, as
 * in a terminal, whose own shell does not die of a Ctrl-C): SIGINT to its whole process group.
 * It must end by itself, by exit 0 or by the SIGINT npx passes on once its child is done (a
 * shell's 130), and leave none of its processes running.
 */
async function interrupt(s: Shell, what: string): Promise<void> {
  const below = await descendants(s.child.pid!);
  process.kill(-s.child.pid!, 'SIGINT');
  const timer = setTimeout(() => process.kill(-s.child.pid!, 'SIGKILL'), 60_000);
  const exit = await s.exited;
  clearTimeout(timer);
  const output = s.output().slice(-4000);
  expect([0, null], `${what} after Ctrl-C: ${JSON.stringify(exit)}\n${output}`).toContain(
    exit.code,
  );
  if (exit.code === null) expect(exit.signal, output).toBe('SIGINT');
  await eventually(() => below.every((p) => !alive(p.pid)), {
    timeoutMs: 30_000,
    message: `every process of ${what} ended: ${below.map((p) => p.args).join('; ')}`,
  });
}

let dev: Shell | undefined;
let devDir: string | undefined;

interface Treatment {
  /** Why the command cannot run as written. */
  why: string;
  run: (command: string) => Promise<void>;
}

const TREATMENTS: Record<string, Treatment> = {
  'npm start': {
    why:
      'it runs scripts/setup.mjs first, which may `npm ci` (replacing node_modules) or ' +
      '`apt-get install nats-server`: nothing a test may do to the machine it runs on. What it ' +
      'then runs, `sonar dev --demo`, test/integration/dev-demo.test.ts runs (with --fast). ' +
      'Here: the script is what the README says it is.',
    run: () => {
      expect(README).toContain(
        'npm start                          # = setup, build dist/ if stale, sonar dev --demo',
      );
      expect(SCRIPTS['start']).toBe(
        'node scripts/setup.mjs && node scripts/ensure-build.mjs && node bin/sonar.js dev --demo',
      );
      expect(existsSync(join(ROOT, 'test', 'integration', 'dev-demo.test.ts'))).toBe(true);
      return Promise.resolve();
    },
  },
  'npx sonar dev': {
    why:
      'it keeps running until Ctrl-C, on 127.0.0.1:4222, which another process may hold on a ' +
      'shared machine. It runs in the background with `--port 0` (a free port, which it prints, ' +
      'as the README says) and `--dir` in a temp dir; the other commands get SONAR_NATS_URL ' +
      'from it, and the tour ends with its Ctrl-C, which must drain and stop everything.',
    run: async (command) => {
      devDir = await mkdtemp(join(tmpdir(), 'sonar-tour-'));
      dev = shell(`exec ${command} --port 0 --dir ${devDir}`);
      const url = await eventually(
        () => /ready: export SONAR_NATS_URL=(\S+);/.exec(dev!.output())?.[1] ?? false,
        { timeoutMs: 90_000, intervalMs: 100, message: 'sonar dev ready' },
      ).catch(withOutput(dev));
      env = { ...env, SONAR_NATS_URL: url };
    },
  },
  'kill -9 <pid of a worker>': {
    why:
      'the reader finds the pid with `ps`. The test takes a `sonar worker` process of its own ' +
      '`sonar dev` that runs a scan task (by its --worker-id in `ps`), and runs the command ' +
      'with that pid.',
    run: async (command) => {
      const sonarEnv = { SONAR_NATS_URL: env['SONAR_NATS_URL']! };
      const busy = await eventually(
        async () => {
          const status = await runSonar('status', ['status', '--json'], sonarEnv);
          const { workers } = JSON.parse(status.stdout) as {
            workers: { workerId: string; tags: string[]; running: number }[];
          };
          return workers.find((w) => w.tags.includes('linux') && w.running > 0)?.workerId ?? false;
        },
        { timeoutMs: 60_000, intervalMs: 500, message: 'a linux worker running a scan task' },
      ).catch(withOutput(dev!));
      const worker = (await descendants(dev!.child.pid!)).find((p) =>
        p.args.includes(`--worker-id ${busy}`),
      );
      expect(worker, `no process of worker ${busy} under sonar dev`).toBeDefined();
      // `npx sonar` ran this checkout: its supervisor starts this checkout's bin.
      expect(worker!.args).toContain(join(ROOT, 'bin', 'sonar.js'));
      await runToEnd(command.replace('<pid of a worker>', String(worker!.pid)));
    },
  },
  'npx sonar tail --run scan-42 --since 10m': {
    why:
      'it follows the run until Ctrl-C. It runs until it has shown the run ending and the ' +
      "killed worker's task requeued, then gets Ctrl-C, and must end by itself.",
    run: async (command) => {
      const tail = shell(`exec ${command}`);
      await eventually(() => tail.output().includes('RunSucceeded'), {
        timeoutMs: 60_000,
        intervalMs: 100,
        message: 'tail shows RunSucceeded',
      }).catch(withOutput(tail));
      // The killed worker's scan task, requeued at once (the supervisor reported its end).
      expect(tail.output()).toMatch(/TaskRequeued .*reason=worker-lost/);
      await interrupt(tail, command);
    },
  },
};

afterAll(async () => {
  // A failed tour leaves its processes running: each shell's and everything below it (sonar
  // dev's workers and nats-server have process groups of their own), each by its pid.
  for (const s of shells) {
    const below = await descendants(s.child.pid!).catch(() => []);
    for (const pid of [s.child.pid!, ...below.map((p) => p.pid)]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
  if (devDir !== undefined) await rm(devDir, { recursive: true, force: true });
});

describe('the README five-minute tour', () => {
  const commands = tourCommands(README);

  it('names every command the test treats apart', () => {
    for (const command of Object.keys(TREATMENTS)) expect(commands).toContain(command);
  });

  it('runs as written against its own sonar dev: every command succeeds', async () => {
    for (const command of commands) {
      const started = performance.now();
      const treatment = TREATMENTS[command];
      if (treatment) await treatment.run(command);
      else await runToEnd(command);
      console.log(`tour: ${command}: ${Math.round(performance.now() - started)} ms`);
    }
    // The end of the tour: Ctrl-C in the first terminal drains the workers and stops.
    expect(dev, 'the tour started no sonar dev').toBeDefined();
    const stopping = performance.now();
    await interrupt(dev!, 'sonar dev');
    console.log(`tour: Ctrl-C of sonar dev: ${Math.round(performance.now() - stopping)} ms`);
    expect(dev!.output()).toContain(
      'stopping: workers drain, then the backend and nats-server stop',
    );
    expect(dev!.output()).not.toMatch(/^sonar: /m);
    // The server outlives the workers' drain: every end is reported to the backend.
    expect(dev!.output()).not.toContain('sonar.api.exited not answered');
    expect(existsSync(join(devDir!, 'nats.pid')), 'sonar dev left its nats-server').toBe(false);
  }, 420_000);
});
