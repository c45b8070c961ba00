import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { startNatsServer } from './nats-server.js';
import type { NatsServer } from './nats-server.js';
import { perFile } from './per-file.js';

/** What {@link serverPerFile} gives a test file, read inside its tests. */
export interface ServerPerFile {
  readonly server: NatsServer;
  readonly nc: NatsConnection;
  /** A JetStream manager on {@link ServerPerFile.nc}: streams and consumers to inspect or purge. */
  readonly jsm: JetStreamManager;
}

/** How the file's one connection connects: options on top of the servers' URLs. */
export type ConnectOptions = Partial<Omit<ConnectionOptions, 'servers'>>;

/** Servers a test file started, one connection to them, and a JetStream manager on that. */
export interface Connected<S> {
  readonly servers: S;
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
}

/** {@link Connected} read through `started`, which throws before the file's first test. */
class ConnectedView<S> implements Connected<S> {
  constructor(protected readonly started: () => Connected<S>) {}
  get servers(): S {
    return this.started().servers;
  }
  get nc(): NatsConnection {
    return this.started().nc;
  }
  get jsm(): JetStreamManager {
    return this.started().jsm;
  }
}

/**
 * `start`ed servers (one, or a cluster) for the calling test file and one connection to `urls`
 * of them (with `opts`, the client's defaults otherwise): started before its first test,
 * closed and stopped after its last (see perFile).
 */
function startedPerFile<S extends { stop(): Promise<void> }>(
  name: string,
  start: () => Promise<S>,
  urls: (servers: S) => string | string[],
  opts: ConnectOptions = {},
): () => Connected<S> {
  return perFile(
    name,
    async () => {
      const servers = await start();
      try {
        const nc = await connect({ ...opts, servers: urls(servers) });
        return { servers, nc, jsm: await jetstreamManager(nc) };
      } catch (err: unknown) {
        await servers.stop();
        throw err;
      }
    },
    async ({ servers, nc }) => {
      await nc.close();
      await servers.stop();
    },
  );
}

/**
 * {@link startedPerFile}, read as {@link Connected}: call it at the top level of the file;
 * read what it gives inside tests only.
 */
export const connectedPerFile = <S extends { stop(): Promise<void> }>(
  name: string,
  start: () => Promise<S>,
  urls: (servers: S) => string | string[],
  opts: ConnectOptions = {},
): Connected<S> => new ConnectedView(startedPerFile(name, start, urls, opts));

class ServerView extends ConnectedView<NatsServer> implements ServerPerFile {
  get server(): NatsServer {
    return this.servers;
  }
}

export interface ServerPerFileOptions {
  /** Starts the server: by default `startNatsServer()` (random loopback port, temp store). */
  start?: () => Promise<NatsServer>;
  /** How the file's connection connects (reconnect settings, say). */
  connect?: ConnectOptions;
}

/**
 * One throwaway nats-server for the calling test file (random loopback port, temp store, or
 * what `opts.start` starts), one connection to it and a JetStream manager on that. Call it at
 * the top level of the file (or of a `describe`, for that block alone); read them inside
 * tests only.
 */
export const serverPerFile = (opts: ServerPerFileOptions = {}): ServerPerFile =>
  new ServerView(
    startedPerFile(
      'serverPerFile',
      opts.start ?? (() => startNatsServer()),
      (s) => s.url,
      opts.connect,
    ),
  );
