import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
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
 * of them: started before its first test, closed and stopped after its last (see perFile).
 */
function startedPerFile<S extends { stop(): Promise<void> }>(
  name: string,
  start: () => Promise<S>,
  urls: (servers: S) => string | string[],
): () => Connected<S> {
  return perFile(
    name,
    async () => {
      const servers = await start();
      try {
        const nc = await connect({ servers: urls(servers) });
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
): Connected<S> => new ConnectedView(startedPerFile(name, start, urls));

class ServerView extends ConnectedView<NatsServer> implements ServerPerFile {
  get server(): NatsServer {
    return this.servers;
  }
}

/**
 * One throwaway nats-server for the calling test file (random loopback port, temp store), one
 * connection to it and a JetStream manager on that. Call it at the top level of the file;
 * read them inside tests only.
 */
export const serverPerFile = (): ServerPerFile =>
  new ServerView(
    startedPerFile(
      'serverPerFile',
      () => startNatsServer(),
      (s) => s.url,
    ),
  );
