import { startNatsCluster } from './nats-cluster.js';
import type { NatsCluster } from './nats-cluster.js';
import { connectedPerFile } from './server-per-file.js';
import type { ConnectOptions, Connected } from './server-per-file.js';

/**
 * A throwaway nats-server cluster of `size` nodes for the calling test file (`servers`), and
 * one connection that knows every node's URL, so it rides out a node going down (`connect`:
 * its options, reconnect settings say): started before its first test, closed and stopped
 * after its last. Read them inside tests only.
 */
export const clusterPerFile = (
  size: number,
  opts: { connect?: ConnectOptions } = {},
): Connected<NatsCluster> =>
  connectedPerFile(
    'clusterPerFile',
    () => startNatsCluster({ size }),
    (cluster) => cluster.urls,
    opts.connect,
  );
