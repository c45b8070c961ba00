/**
 * A throwaway 3-node JetStream cluster on 127.0.0.1 for chaos and replication tests.
 *
 * Ports are picked up front (bind port 0, close) so every node's config can list the others'
 * routes, and so a restarted node comes back on the same client, cluster and monitoring ports
 * with the same store dir.
 *
 * With `SONAR_CHAOS_LOGS=<dir>`, every node logs to a file there instead of stderr, with debug
 * lines (raft votes and terms), appended across its restarts and kept after `stop()`.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { ConnectionOptions } from '@nats-io/transport-node';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { eventually } from './eventually.js';
import { startNatsServer } from './nats-server.js';
import type { NatsServer } from './nats-server.js';

export interface NatsClusterOptions {
  /** Number of nodes (default 3). */
  size?: number;
  /** Cluster name (default `sonar_test`). */
  name?: string;
  /** How long to wait for a JetStream meta leader at start (default 20 s). */
  readyTimeoutMs?: number;
  /** How long `restartNode` waits for it (default {@link RESTART_TIMEOUT_MS}). */
  restartTimeoutMs?: number;
  /** Lines added inside every node's `cluster { }` block, e.g. an `include` of route TLS. */
  clusterConfig?: string;
  /**
   * Top-level lines added to node `name`'s config, given a directory of its own (created,
   * kept across restarts, removed by `stop()`): e.g. secure mode's operator, system account
   * and full resolver, whose JWT directory no two nodes may share (see secure-nats.ts).
   */
  nodeConfig?: (node: { name: string; dir: string }) => string;
  /**
   * Options of the connections that check readiness (`$JS.API.INFO` on each node), e.g. the
   * authenticator and inbox prefix of a role allowed to ask it, when the nodes require auth.
   */
  connectOptions?: Partial<ConnectionOptions>;
}

export interface NatsClusterNode extends NatsServer {
  /** `server_name`: n1, n2, ... */
  readonly name: string;
  /** Route (cluster) port. */
  readonly clusterPort: number;
  /** HTTP monitoring port (`/jsz`, `/varz`, `/healthz`). */
  readonly monitorPort: number;
  /** The file the node logs to, when `SONAR_CHAOS_LOGS` is set; else its log is `logs()`. */
  readonly logFile: string | undefined;
}

export interface NatsCluster {
  readonly servers: readonly NatsClusterNode[];
  /** Client URLs of every node, for `connect({ servers: urls })`. */
  readonly urls: string[];
  /** Graceful stop (SIGTERM) of node i; its store dir is kept. */
  stopNode(i: number): Promise<void>;
  /** Signal node i (default SIGKILL) and await its exit; its store dir is kept. */
  killNode(i: number, signal?: NodeJS.Signals): Promise<void>;
  /** Start node i again (same ports, same store dir) and wait until it serves JetStream. */
  restartNode(i: number): Promise<void>;
  /** Resolves once every running node answers a JetStream API request (meta leader known). */
  waitReady(timeoutMs?: number): Promise<void>;
  /** Stop every node and remove the cluster's temp dir. */
  stop(): Promise<void>;
}

/**
 * How long a restarted node may take to answer `$JS.API.INFO`. A node that rejoins a cluster
 * with a meta leader hears from it within a heartbeat (1 s). A restart that gives back a lost
 * quorum waits for an election instead, and nats-server 2.9 starts a campaign only after a
 * random 4 to 9 s without a leader (raft.go: minElectionTimeout, maxElectionTimeout); a fresh
 * cluster campaigns at once, which is why readyTimeoutMs can be shorter. Rounds are lost after
 * such a restart: the node that stayed up kept campaigning alone and raised its term, so it
 * refuses a returning node's campaign at that node's old term. The refusal unseats the
 * candidate even when the other returning node's grant came first and made it leader, and a
 * leader unseated so does not take the refusal's term: its next campaign, at its own term plus
 * one, is refused the same way. Each of those short leaderships appends an entry that the node
 * that stayed up lacks, so its own campaigns are refused next, for a shorter log; every vote
 * request, even a refused one, restarts the 4 to 9 s timer of the node that gets it. Three or
 * four rounds of up to 9 s each, after a store recovery that takes seconds on a loaded
 * machine, pass 20 s; 60 s leaves room for a few more.
 */
export const RESTART_TIMEOUT_MS = 60_000;

/** Distinct free TCP ports on 127.0.0.1: all are held open together, then released. */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve());
      });
    }
    return servers.map((s) => {
      const address = s.address();
      if (address === null || typeof address === 'string') throw new Error('no port bound');
      return address.port;
    });
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

function nodeConfig(args: {
  name: string;
  clusterName: string;
  port: number;
  clusterPort: number;
  monitorPort: number;
  storeDir: string;
  logFile: string | undefined;
  routePorts: number[];
  clusterConfig: string | undefined;
  nodeConfig: string | undefined;
}): string {
  const routes = args.routePorts.map((p) => `    nats-route://127.0.0.1:${p}`).join('\n');
  return [
    `server_name: ${args.name}`,
    `listen: 127.0.0.1:${args.port}`,
    `http: 127.0.0.1:${args.monitorPort}`,
    `jetstream {`,
    `  store_dir: ${JSON.stringify(args.storeDir)}`,
    `}`,
    `cluster {`,
    `  name: ${args.clusterName}`,
    `  listen: 127.0.0.1:${args.clusterPort}`,
    `  routes: [`,
    routes,
    `  ]`,
    ...(args.clusterConfig !== undefined ? [args.clusterConfig] : []),
    `}`,
    ...(args.nodeConfig !== undefined ? [args.nodeConfig] : []),
    ...(args.logFile !== undefined
      ? [`log_file: ${JSON.stringify(args.logFile)}`, 'debug: true']
      : []),
    '',
  ].join('\n');
}

/** The last lines of node `n`'s log (its file, or its stderr) that say where meta stands. */
async function metaLogTail(n: NatsClusterNode, lines = 12): Promise<string> {
  let text = n.logs();
  if (n.logFile !== undefined) {
    text = await readFile(n.logFile, 'utf8').catch((err: unknown) => `(${String(err)})`);
  }
  const meta =
    /Starting nats-server|Server is ready|metadata leader|_meta_\] (Switching|Sending out voteRequest|Stepping down)|\[(ERR|FTL)\]/;
  // A route to a node that is down is retried every second: not news.
  const routeRetry = /Error trying to connect to route/;
  return text
    .split('\n')
    .filter((line) => meta.test(line) && !routeRetry.test(line))
    .slice(-lines)
    .join('\n');
}

/** Each node's view of the JetStream meta group (its `/jsz`), and its log's meta lines. */
async function describeMeta(nodes: readonly NatsClusterNode[]): Promise<string> {
  const views = await Promise.all(
    nodes.map(async (n) => {
      let view: string;
      if (!n.running) {
        view = 'not running';
      } else {
        try {
          const res = await fetch(`http://127.0.0.1:${n.monitorPort}/jsz`, {
            signal: AbortSignal.timeout(2_000),
          });
          const jsz = (await res.json()) as {
            meta_cluster?: {
              leader?: string;
              cluster_size?: number;
              replicas?: { name: string; current?: boolean; offline?: boolean; active?: number }[];
            };
          };
          const meta = jsz.meta_cluster;
          const peers = (meta?.replicas ?? [])
            .map(
              (r) =>
                `${r.name}${r.offline === true ? ' offline' : ''}${r.current === true ? ' current' : ''}` +
                (r.active !== undefined ? ` seen ${Math.round(r.active / 1e6)} ms ago` : ''),
            )
            .join(', ');
          view =
            `meta leader ${meta?.leader ?? '(none)'}, cluster_size ${meta?.cluster_size ?? '?'}` +
            (peers !== '' ? `, peers: ${peers}` : '');
        } catch (err: unknown) {
          view = `/jsz: ${String(err)}`;
        }
      }
      const where = n.logFile !== undefined ? ` (log: ${n.logFile})` : '';
      return `--- ${n.name} pid ${n.pid}: ${view}${where}\n${await metaLogTail(n)}`;
    }),
  );
  return views.join('\n');
}

/** Waits until `node` answers `$JS.API.INFO`, which needs an elected meta leader. */
async function waitJetStream(
  node: NatsServer,
  timeoutMs: number,
  connectOptions: Partial<ConnectionOptions> = {},
): Promise<void> {
  // The connection is part of the probe: a node that has just started in operator mode may
  // refuse a valid credential for a moment (an Authorization Violation was seen once, a
  // quarter second after a secure cluster's node logged "Server is ready").
  await eventually(
    async () => {
      const nc = await connect({
        ...connectOptions,
        servers: node.url,
        reconnect: false,
        timeout: 2_000,
      });
      try {
        const jsm = await jetstreamManager(nc, { timeout: 1_000, checkAPI: false });
        await jsm.getAccountInfo();
      } finally {
        await nc.close();
      }
    },
    { timeoutMs, intervalMs: 100, message: `JetStream ready on ${node.url}` },
  );
}

export async function startNatsCluster(opts: NatsClusterOptions = {}): Promise<NatsCluster> {
  const size = opts.size ?? 3;
  const clusterName = opts.name ?? 'sonar_test';
  const readyTimeoutMs = opts.readyTimeoutMs ?? 20_000;
  const restartTimeoutMs = opts.restartTimeoutMs ?? RESTART_TIMEOUT_MS;
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`size ${size} must be >= 1`);

  const dir = await mkdtemp(join(tmpdir(), 'sonar-nats-cluster-'));
  const ports = await freePorts(size * 3);
  const clientPorts = ports.slice(0, size);
  const clusterPorts = ports.slice(size, size * 2);
  const monitorPorts = ports.slice(size * 2);
  const logsDir = process.env['SONAR_CHAOS_LOGS'];
  if (logsDir) await mkdir(logsDir, { recursive: true });
  const nodes: NatsClusterNode[] = [];

  const stopAll = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.stop()));
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  };

  try {
    const started = await Promise.all(
      clientPorts.map(async (port, i) => {
        const name = `n${i + 1}`;
        const clusterPort = clusterPorts[i]!;
        const monitorPort = monitorPorts[i]!;
        const logFile = logsDir ? join(logsDir, `${basename(dir)}-${name}.log`) : undefined;
        const storeDir = join(dir, name);
        await mkdir(storeDir, { recursive: true });
        let nodeConfigText: string | undefined;
        if (opts.nodeConfig !== undefined) {
          const nodeDir = join(dir, `${name}-own`);
          await mkdir(nodeDir, { recursive: true });
          nodeConfigText = opts.nodeConfig({ name, dir: nodeDir });
        }
        const config = join(dir, `${name}.conf`);
        const routePorts = clusterPorts.filter((p) => p !== clusterPort);
        await writeFile(
          config,
          nodeConfig({
            name,
            clusterName,
            port,
            clusterPort,
            monitorPort,
            storeDir,
            logFile,
            routePorts,
            clusterConfig: opts.clusterConfig,
            nodeConfig: nodeConfigText,
          }),
        );
        const server = await startNatsServer({ config, port, storeDir });
        return Object.assign(server, { name, clusterPort, monitorPort, logFile });
      }),
    );
    nodes.push(...started);
  } catch (err: unknown) {
    await stopAll();
    throw err;
  }

  /** A wait that failed says what each node knows of the meta group. */
  const withMetaState = async <T>(wait: Promise<T>): Promise<T> => {
    try {
      return await wait;
    } catch (err: unknown) {
      const why = err instanceof Error ? err.message : String(err);
      throw new Error(`${why}\n${await describeMeta(nodes)}`, { cause: err });
    }
  };

  const node = (i: number): NatsClusterNode => {
    const n = nodes[i];
    if (n === undefined) throw new RangeError(`node ${i} out of range 0..${nodes.length - 1}`);
    return n;
  };

  const cluster: NatsCluster = {
    servers: nodes,
    urls: nodes.map((n) => n.url),
    stopNode: (i) => node(i).kill('SIGTERM'),
    killNode: (i, signal = 'SIGKILL') => node(i).kill(signal),
    async restartNode(i) {
      const n = node(i);
      await n.restart();
      await withMetaState(waitJetStream(n, restartTimeoutMs, opts.connectOptions));
    },
    async waitReady(timeoutMs = readyTimeoutMs) {
      await withMetaState(
        Promise.all(
          nodes
            .filter((n) => n.running)
            .map((n) => waitJetStream(n, timeoutMs, opts.connectOptions)),
        ),
      );
    },
    stop: stopAll,
  };

  try {
    await cluster.waitReady();
  } catch (err: unknown) {
    const logs = nodes.map((n) => `--- ${n.name} ---\n${n.logs().slice(-4_000)}`).join('\n');
    await stopAll();
    throw new Error(`nats cluster not ready: ${String(err)}\n${logs}`, { cause: err });
  }
  return cluster;
}
