import type { NatsConnection } from '@nats-io/transport-node';
import { names } from '../../streams/names.js';
import type { SonarConfig } from '../config.js';
import type { Logger } from '../log.js';
import { PgResultsSink } from './postgres/index.js';
import { KvResultsSink } from './results-sink.js';
import type { ResultsReader, ResultsSink } from './results-sink.js';

/** A sink that can also be read back: what `SONAR_RESULTS_URL` chooses between. */
export type ConfiguredSink = ResultsSink & ResultsReader;

/** The settings the results sink is chosen and bounded by. */
export type ResultsSinkSettings = Pick<SonarConfig, 'prefix' | 'resultsUrl' | 'finalizers'>;

/**
 * The configured results sink: the PostgreSQL table when `SONAR_RESULTS_URL` is set, at most
 * `SONAR_FINALIZERS` connections (the finalizer pool's bound is the database's), else the
 * `<prefix>_results` KV bucket. Opening the PostgreSQL one connects to nothing yet: it
 * migrates on first use, so a backend starts while its database is down.
 */
export async function createResultsSink(
  nc: NatsConnection,
  config: ResultsSinkSettings,
  opts: { log?: Logger; by?: string } = {},
): Promise<ConfiguredSink> {
  if (config.resultsUrl === undefined) return KvResultsSink.open(nc, names(config.prefix));
  return Promise.resolve(
    new PgResultsSink({
      url: config.resultsUrl,
      prefix: config.prefix,
      maxConnections: config.finalizers,
      ...(opts.by !== undefined && { by: opts.by }),
      ...(opts.log !== undefined && { log: opts.log }),
    }),
  );
}
