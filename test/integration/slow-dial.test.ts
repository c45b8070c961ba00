/**
 * A server that answers late, as one on a loaded host does while many processes start
 * together: a long-lived connection (a worker's, a backend's) waits for it, a one-shot verb's
 * gives up after its own dial timeout with one line. A TCP relay in front of a real server
 * holds each new connection before passing its bytes on.
 */
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DIAL_TIMEOUT_MS, connectNats } from '../../src/nats.js';
import { serverPerFile } from '../helpers/server-per-file.js';

const nats = serverPerFile();
/** Longer than a one-shot dial may take, well within a long-lived one's. */
const HOLD_MS = DIAL_TIMEOUT_MS['one-shot'] + 1_500;

let relay: Server;
let relayUrl = '';
const sockets = new Set<Socket>();

beforeAll(async () => {
  const target = new URL(nats.server.url);
  relay = createServer((client) => {
    sockets.add(client);
    client.pause();
    const timer = setTimeout(() => {
      const upstream = createConnection(Number(target.port), '127.0.0.1');
      sockets.add(upstream);
      client.pipe(upstream).pipe(client);
      client.resume();
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    }, HOLD_MS);
    client.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const address = relay.address();
  if (address === null || typeof address === 'string') throw new Error('relay has no port');
  relayUrl = `nats://127.0.0.1:${address.port}`;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => relay.close(() => resolve()));
});

it('a long-lived connection waits for a server that answers late', async () => {
  const started = performance.now();
  const nc = await connectNats({ natsUrl: relayUrl });
  try {
    expect(performance.now() - started).toBeGreaterThanOrEqual(HOLD_MS - 50);
    await nc.flush();
  } finally {
    await nc.close();
  }
});

it('a one-shot verb gives up on it with one line', async () => {
  await expect(connectNats({ natsUrl: relayUrl }, { life: 'one-shot' })).rejects.toThrow(
    new RegExp(`^cannot reach NATS at ${relayUrl}: timeout`),
  );
});
