import { createWriteStream, openSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Backend } from '../backend/backend.js';
import { defaultParts } from '../default-parts.js';
import { loadProcessConfig } from '../config.js';
import type { SonarConfig } from '../config.js';
import { createLogger } from '../log.js';
import { ApiClient } from '../worker/api-client.js';
import { startLocalNats } from './local-nats.js';
import { devWorkerSpecs } from './demo-run.js';
import { Supervisor } from './supervisor.js';
import type { SupervisorEvent } from './supervisor.js';

export interface DevStackOptions {
  /** State and logs. @defaultValue `.sonar` */
  dir?: string;
  /** nats-server port on 127.0.0.1; 0 picks a free one. @defaultValue 4222 */
  port?: number;
  /** Local worker processes. @defaultValue 3 */
  workers?: number;
  /** Short ticks, pulses and drains, for CI. */
  fast?: boolean;
  /** `SONAR_*` overrides on top of the environment (flags). */
  overrides?: Record<string, string | number | undefined>;
  onSupervisorEvent?: (e: SupervisorEvent) => void;
}

/** Timings `--fast` uses: a recovery within a second, a drain within two. */
export const FAST_SETTINGS = {
  SONAR_TICK: '250ms',
  // Generous next to the tick: a loaded CI machine must not lose the lock between renewals.
  SONAR_LOCK_TTL: '3s',
  SONAR_PULSE_INTERVAL: '500ms',
  SONAR_PULSE_TTL: '2s',
  SONAR_DRAIN_GRACE: '2s',
} as const;

/** A port nothing listens on right now (127.0.0.1). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The embedded default, running. `stop()` ends workers, then the backend, then the server. */
export interface DevStack {
  url: string;
  config: SonarConfig;
  backend: Backend;
  supervisor: Supervisor;
  /** Where the backend and worker logs go. */
  logDir: string;
  stop(): Promise<void>;
}

/**
 * `sonar dev`'s stack: a local nats-server storing in `.sonar/nats`, the backend
 * in this process with the default parts, and local workers with different tags and slots
 * under a supervisor. Logs go to files under `.sonar/logs/`, so the terminal shows Sonar's
 * progress rather than JSON lines. Whatever started is stopped again when a later part fails.
 */
export async function startDevStack(opts: DevStackOptions = {}): Promise<DevStack> {
  const dir = resolve(opts.dir ?? '.sonar');
  const logDir = join(dir, 'logs');
  await mkdir(logDir, { recursive: true });
  const nats = await startLocalNats({ dir, port: opts.port ?? 4222 });
  const undo: (() => Promise<void>)[] = [() => nats.stopAndForget()];
  const rollback = async () => {
    for (const u of undo.reverse()) await u().catch(() => {});
  };
  try {
    const config = loadProcessConfig({
      ...(opts.fast ? FAST_SETTINGS : {}),
      ...opts.overrides,
      SONAR_NATS_URL: nats.url,
    });
    // The banner prints the port: pick a free one here rather than let the server choose.
    if (config.httpPort === 0) config.httpPort = await freePort();
    const backendLog = createWriteStream(join(logDir, 'backend.log'), { flags: 'a' });
    undo.push(() => new Promise<void>((done) => backendLog.end(() => done())));
    const backend = await Backend.start({
      config,
      parts: defaultParts,
      log: createLogger({ component: 'backend', level: config.logLevel, destination: backendLog }),
    });
    undo.push(() => backend.stop());
    const workersLog = join(logDir, 'workers.log');
    const supervisor = new Supervisor({
      specs: devWorkerSpecs(opts.workers ?? 3),
      api: new ApiClient(backend.ctx.nc, backend.ctx.names),
      env: {
        SONAR_NATS_URL: nats.url,
        SONAR_PREFIX: config.prefix,
        ...(opts.fast && { SONAR_DRAIN_GRACE: FAST_SETTINGS.SONAR_DRAIN_GRACE }),
      },
      output: () => openSync(workersLog, 'a'),
      stopTimeoutMs: config.drainGraceMs + 5_000,
      ...(opts.onSupervisorEvent && { onEvent: opts.onSupervisorEvent }),
      log: createLogger({
        component: 'supervisor',
        level: config.logLevel,
        destination: backendLog,
      }),
    });
    supervisor.start();
    undo.push(() => supervisor.stop());
    let stopped: Promise<void> | null = null;
    return {
      url: nats.url,
      config,
      backend,
      supervisor,
      logDir,
      stop: () => (stopped ??= rollback()),
    };
  } catch (err: unknown) {
    await rollback();
    throw err;
  }
}
