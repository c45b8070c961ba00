import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll } from 'vitest';
import { startNatsCluster } from './nats-cluster.js';
import type { NatsCluster } from './nats-cluster.js';

/** What {@link clusterPerFile} gives a test file, read inside its tests. */
export interface ClusterPerFile {
  readonly cluster: NatsCluster;
  /** One connection that knows every node's URL, so it rides out a node going down. */
  readonly nc: NatsConnection;
}

/**
 * A throwaway nats-server cluster of `size` nodes for the calling test file, and one
 * connection to it: started before its first test, closed and stopped after its last.
 * The cluster counterpart of serverPerFile; read `cluster` and `nc` inside tests only.
 */
export function clusterPerFile(size: number): ClusterPerFile {
  let cluster: NatsCluster | undefined;
  let nc: NatsConnection | undefined;
  beforeAll(async () => {
    cluster = await startNatsCluster({ size });
    nc = await connect({ servers: cluster.urls });
  });
  afterAll(async () => {
    await nc?.close();
    await cluster?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('clusterPerFile: read inside a test, not at load');
    return value;
  };
  return {
    get cluster() {
      return started(cluster);
    },
    get nc() {
      return started(nc);
    },
  };
}
