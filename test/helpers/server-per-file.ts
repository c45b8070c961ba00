import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll } from 'vitest';
import { startNatsServer } from './nats-server.js';
import type { NatsServer } from './nats-server.js';

/** What {@link serverPerFile} gives a test file, read inside its tests. */
export interface ServerPerFile {
  readonly server: NatsServer;
  readonly nc: NatsConnection;
  /** A JetStream manager on {@link ServerPerFile.nc}: streams and consumers to inspect or purge. */
  readonly jsm: JetStreamManager;
}

/**
 * One throwaway nats-server for the calling test file (random loopback port, temp store) and
 * one connection to it (and a JetStream manager on it): started before its first test, closed and stopped after its last.
 * Call it at the top level of the file; read `server` and `nc` inside tests only.
 */
export function serverPerFile(): ServerPerFile {
  let server: NatsServer | undefined;
  let nc: NatsConnection | undefined;
  let jsm: JetStreamManager | undefined;
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('serverPerFile: read inside a test, not at load');
    return value;
  };
  return {
    get server() {
      return started(server);
    },
    get nc() {
      return started(nc);
    },
    get jsm() {
      return started(jsm);
    },
  };
}
