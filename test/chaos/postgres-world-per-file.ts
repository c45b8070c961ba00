/**
 * The opening of the chaos scenarios whose finalizers write results to PostgreSQL: the
 * file's world on a secure server (see world-per-file.ts) and the file's PostgreSQL server.
 */
import { postgresPerFile } from '../helpers/postgres.js';
import type { Postgres } from '../helpers/postgres.js';
import type { RunFile } from '../../src/protocol.js';
import { worldOnServer } from './world-per-file.js';
import type { ChaosWorld } from './world.js';

export interface PostgresWorldPerFile {
  /** The file's PostgreSQL server (read inside tests only): for faults on it. */
  readonly postgres: () => Postgres;
  /**
   * Starts the file's world, its finalizers (`finalizers` jobs at once per backend) writing
   * results to {@link PostgresWorldPerFile.postgres} (each write counted), two backends and `workers`
   * supervised workers of four slots each, and submits `run`.
   */
  running(run: RunFile, fleet: { finalizers: number; workers: number }): Promise<ChaosWorld>;
}

/** Call at the top level of a test file, like worldOnServer. */
export function postgresWorldPerFile(): PostgresWorldPerFile {
  const chaos = worldOnServer();
  const postgres = postgresPerFile();
  return {
    postgres,
    async running(run, { finalizers, workers }) {
      const w = await chaos.world({
        env: { SONAR_FINALIZERS: String(finalizers), SONAR_RESULTS_URL: postgres().url },
      });
      await w.countResultWrites();
      await w.startBackends(2);
      await w.startSupervisedWorkers(workers, { slots: 4 });
      await w.submit(run);
      return w;
    },
  };
}
