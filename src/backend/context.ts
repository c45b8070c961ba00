import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AckedPublisher } from '../../streams/acked-publisher.js';
import type { EventStore } from '../../streams/event-store.js';
import type { Names } from '../../streams/names.js';
import type { SonarConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { ConfiguredSink } from '../storage/create-results-sink.js';
import type { OutputStore } from '../storage/output-store.js';
import type { DispatchConsumers } from './reconciler/index.js';
import type { Enrollments } from './api/index.js';
import type { EventWriter } from './projection/index.js';
import type { WorkerCredentialIssuer } from './api/index.js';
import type { Liveness } from './reconciler/index.js';
import type { ProjectionLoop } from './projection/index.js';
import type { Registry } from './reconciler/index.js';
import type { ServerContact } from './server-contact.js';

/**
 * What every backend component is built from. One per backend process; components take it
 * in their factory and never read process.env or open connections of their own.
 */
export interface BackendContext {
  config: SonarConfig;
  names: Names;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  store: EventStore;
  /** Publishes the events and the dispatch messages, their acks to one inbox. */
  publisher: AckedPublisher;
  loop: ProjectionLoop;
  writer: EventWriter;
  registry: Registry;
  /** Which public key holds each worker id. */
  enrollments: Enrollments;
  /** Mints workers' own credentials: secure mode. Null in open mode. */
  credentials: WorkerCredentialIssuer | null;
  /** The `dispatch_<tag>` consumers made sure of, for `join`, the leader and the sweep. */
  dispatchConsumers: DispatchConsumers;
  outputs: OutputStore;
  /**
   * The configured results sink (`SONAR_RESULTS_URL`: PostgreSQL, else the KV bucket): the
   * finalizers write it, retention purges it, the backend closes it last.
   */
  results: ConfiguredSink;
  log: Logger;
  /** Whether the server answers, and since when without a break. */
  contact: ServerContact;
  /** The checks `/healthz` runs (src/backend/reconciler/liveness.ts). */
  liveness: Liveness;
  /** This backend's id (leader election, `by` fields): unique per process. */
  nodeId: string;
  /** The clock; tests and the simulation may replace it. */
  now: () => number;
}
