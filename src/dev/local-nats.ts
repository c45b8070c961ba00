import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { startNatsServer } from './nats-server.js';
import type { NatsServer } from './nats-server.js';

export interface LocalNatsOptions {
  /** Where `sonar dev` keeps its state. @defaultValue `.sonar` in the working directory */
  dir?: string;
  /** Client port on 127.0.0.1; 0 picks a free one. @defaultValue 4222 */
  port?: number;
}

/** Refuses a taken port up front, with the fix, rather than a nats-server log excerpt. */
async function assertPortFree(port: number): Promise<void> {
  await new Promise<void>((ok, fail) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      fail(
        err.code === 'EADDRINUSE'
          ? new SonarError(
              ErrorCode.Conflict,
              `127.0.0.1:${port} is taken: stop what listens there, or pass --port N (--port 0 picks a free port)`,
              { port },
            )
          : err,
      );
    });
    probe.listen(port, '127.0.0.1', () => probe.close(() => ok()));
  });
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * A nats-server left running by a `sonar dev` that crashed: only a pid we recorded, and only
 * if it still is a nats-server on our store dir (pids are reused), is stopped.
 */
async function stopLeftover(pidFile: string, storeDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number((await readFile(pidFile, 'utf8')).trim());
  } catch {
    return;
  }
  if (Number.isInteger(pid) && pid > 1 && isAlive(pid)) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes('nats-server') && cmdline.includes(storeDir)) {
      process.kill(pid, 'SIGKILL');
      for (let i = 0; i < 100 && isAlive(pid); i++) await delay(20);
    }
  }
  await rm(pidFile, { force: true });
}

/**
 * The embedded default's server: `nats-server -js` as a child process, storing in `.sonar/nats`
 * so a restart of `sonar dev` keeps its runs. Leftovers of a crashed run are cleaned up first.
 */
export async function startLocalNats(
  opts: LocalNatsOptions = {},
): Promise<NatsServer & { stopAndForget(): Promise<void> }> {
  const dir = resolve(opts.dir ?? '.sonar');
  const storeDir = join(dir, 'nats');
  const pidFile = join(dir, 'nats.pid');
  const port = opts.port ?? 4222;
  await mkdir(storeDir, { recursive: true });
  await stopLeftover(pidFile, storeDir);
  if (port !== 0) await assertPortFree(port);
  const server = await startNatsServer({
    port: port === 0 ? -1 : port,
    storeDir,
    ownProcessGroup: true,
  });
  await writeFile(pidFile, `${server.pid}\n`);
  return Object.assign(server, {
    async stopAndForget() {
      await server.stop();
      await rm(pidFile, { force: true });
    },
  });
}
