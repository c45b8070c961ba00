/**
 * What every chaos test file (long ones too) does around its one world: a server in secure
 * mode whose credentials are made for a fresh prefix, started before the file's tests, and
 * after them the world, every process spawned and the server stopped. Called inside a
 * `describe`, the same for that block alone.
 */
import { startSecureCluster, startSecureNats } from '../helpers/secure-nats.js';
import type { SecureCluster, SecureEnvironment, SecureNats } from '../helpers/secure-nats.js';
import { perFile } from '../helpers/per-file.js';
import { killAll } from '../helpers/sonar-process.js';
import { freshPrefix } from '../helpers/topology.js';
import type { RunFile } from '../../src/protocol.js';
import { ChaosWorld } from './world.js';
import type { WorkerOptions, WorldOptions } from './world.js';

export interface WorldPerFile<S extends SecureEnvironment> {
  /** The secure server or cluster (read inside tests only): for faults on it. */
  readonly secure: S;
  /** Starts the file's world on {@link WorldPerFile.secure}. */
  world(opts?: Omit<WorldOptions, 'secure'>): Promise<ChaosWorld>;
  /**
   * The opening most scenarios share: the file's world ({@link WorldPerFile.world}, `env`
   * on top of CHAOS_ENV), its `backends` started one at a time, its `workers` supervised and
   * live, and `run` submitted.
   */
  running(run: RunFile, fleet: Fleet): Promise<ChaosWorld>;
}

/**
 * What {@link WorldPerFile.running} starts before it submits: the world's `env`, how many
 * backends and workers, and each worker's `slots` and `command` (WorkerOptions' defaults).
 */
export interface Fleet extends Omit<WorldOptions, 'secure'>, Omit<WorkerOptions, 'supervise'> {
  backends: number;
  workers: number;
}

export function worldPerFile<S extends SecureEnvironment & { stop(): Promise<void> }>(
  startSecure: (prefix: string) => Promise<S>,
): WorldPerFile<S> {
  let world: ChaosWorld | undefined;
  const started = perFile(
    'worldPerFile',
    () => startSecure(freshPrefix()),
    async (secure) => {
      await world?.stop();
      await killAll();
      await secure.stop();
    },
  );
  const startWorld = async (opts: Omit<WorldOptions, 'secure'> = {}): Promise<ChaosWorld> => {
    world = await ChaosWorld.start({ ...opts, secure: started() });
    return world;
  };
  return {
    get secure() {
      return started();
    },
    world: startWorld,
    async running(run, { backends, workers, env, ...worker }) {
      const w = await startWorld(env ? { env } : {});
      await w.startBackends(backends);
      await w.startSupervisedWorkers(workers, worker);
      await w.submit(run);
      return w;
    },
  };
}

/** A single server in secure mode, its credentials made for this file's one world. */
export const worldOnServer = (): WorldPerFile<SecureNats> =>
  worldPerFile((prefix) => startSecureNats({ prefix }));

/** `size` nodes, each in operator mode with a full resolver of its own; credentials for one world. */
export const worldOnCluster = (size: number): WorldPerFile<SecureCluster> =>
  worldPerFile((prefix) => startSecureCluster({ prefix, size }));
