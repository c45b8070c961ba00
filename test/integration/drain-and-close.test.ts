/**
 * A process that ends while its connection is dialling a server that refuses it (a revoked
 * credential) must not stay alive: drainAndClose closes the connection whatever the drain
 * did. The server's password changes by a config reload, so every redial is refused.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Deadline } from '../../src/grace.js';
import { drainAndClose, reconnectPolicy } from '../../src/nats.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';

let dir: string;
let config: string;
let server: NatsServer;

const configWith = (password: string) =>
  `jetstream { store_dir: ${JSON.stringify(join(dir, 'js'))} }
authorization { users = [ { user: w, password: ${password} } ] }
`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sonar-drain-close-'));
  config = join(dir, 'nats.conf');
  await writeFile(config, configWith('one'));
  server = await startNatsServer({ config, storeDir: join(dir, 'js') });
});

afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

it('closes a connection whose redials the server refuses, within the grace', async () => {
  const nc = await connect({
    servers: server.url,
    user: 'w',
    pass: 'one',
    ...reconnectPolicy('long-lived'),
    // As a worker's connection: refusals do not end it, so only a close does.
    ignoreAuthErrorAbort: true,
  });
  const refused = (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error' && /authorization/i.test(String(s.error))) return;
    }
  })();
  // The reload drops the connection, whose credential is no longer valid, and refuses it again.
  await writeFile(config, configWith('two'));
  process.kill(server.pid, 'SIGHUP');
  await refused;
  expect(nc.isClosed()).toBe(false);

  await drainAndClose(nc, new Deadline(10_000));
  expect(nc.isClosed()).toBe(true);
  await nc.closed();
});
