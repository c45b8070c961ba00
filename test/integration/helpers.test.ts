import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { nuid } from '@nats-io/transport-node';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { clusterPerFile } from '../helpers/cluster-per-file.js';
import { eventually } from '../helpers/eventually.js';
import { NATS_SERVER_NOT_FOUND, startNatsServer } from '../helpers/nats-server.js';
import { serverPerFile } from '../helpers/server-per-file.js';

const prefix = (): string => `t${nuid.next()}`;

describe('eventually', () => {
  it('resolves with the first value that does not throw and is not false', async () => {
    let n = 0;
    await expect(eventually(() => ++n >= 3 && n, { intervalMs: 1 })).resolves.toBe(3);
  });

  it('times out naming the last error', async () => {
    await expect(
      eventually(
        () => {
          throw new Error('boom');
        },
        { timeoutMs: 50, intervalMs: 5, message: 'the thing' },
      ),
    ).rejects.toThrow(/the thing not met after 50 ms .*last error: boom/);
  });
});

describe('startNatsServer', () => {
  // serverPerFile starts it; the connection rides out the restart below.
  const nats = serverPerFile({ connect: { reconnectTimeWait: 50, maxReconnectAttempts: -1 } });

  it('serves JetStream on a random 127.0.0.1 port', async () => {
    const { server, nc } = nats;
    expect(server.url).toBe(`nats://127.0.0.1:${server.port}`);
    expect(server.pid).toBeGreaterThan(0);
    const p = prefix();
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: `${p}_S`, subjects: [`${p}.>`], num_replicas: 1 });
    const ack = await jetstream(nc).publish(`${p}.a`, 'hello');
    expect(ack).toMatchObject({ stream: `${p}_S`, seq: 1 });
  });

  it('restart() keeps the port and the stored messages', async () => {
    const { server, nc } = nats;
    const p = prefix();
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: `${p}_S`, subjects: [`${p}.>`] });
    await jetstream(nc).publish(`${p}.a`, 'kept');
    const { port, pid } = server;
    await server.restart();
    expect(server.port).toBe(port);
    expect(server.pid).not.toBe(pid);
    const info = await eventually(async () => {
      const fresh = await jetstreamManager(nc, { timeout: 500 });
      return fresh.streams.info(`${p}_S`);
    });
    expect(info.state.messages).toBe(1);
  });

  it('stop() kills the process and removes its temp dir', async () => {
    const other = await startNatsServer();
    const { storeDir, pid } = other;
    expect(existsSync(storeDir)).toBe(true);
    await other.stop();
    expect(other.running).toBe(false);
    expect(existsSync(storeDir)).toBe(false);
    expect(() => process.kill(pid, 0)).toThrow();
  });

  it('explains a missing binary', async () => {
    const saved = process.env['NATS_SERVER_BIN'];
    process.env['NATS_SERVER_BIN'] = '/nonexistent';
    try {
      await expect(startNatsServer()).rejects.toThrow(NATS_SERVER_NOT_FOUND);
    } finally {
      if (saved === undefined) delete process.env['NATS_SERVER_BIN'];
      else process.env['NATS_SERVER_BIN'] = saved;
    }
  });

  it('includes stderr when the server cannot start', async () => {
    await expect(startNatsServer({ args: ['--no-such-flag'] })).rejects.toThrow(
      /no-such-flag[\s\S]*stderr/,
    );
  });
});

describe('startNatsCluster', () => {
  // clusterPerFile starts it; the connection rides out a node going down.
  const nats = clusterPerFile(3, { connect: { reconnectTimeWait: 100, maxReconnectAttempts: -1 } });

  it('keeps an R3 stream writable while a node is down and catches it up', async () => {
    const { servers: cluster, nc } = nats;
    expect(cluster.servers.map((s) => s.name)).toEqual(['n1', 'n2', 'n3']);
    const p = prefix();
    const stream = `${p}_S`;
    const jsm = await jetstreamManager(nc);
    await eventually(
      () => jsm.streams.add({ name: stream, subjects: [`${p}.>`], num_replicas: 3 }),
      {
        message: 'R3 stream created',
      },
    );
    const js = jetstream(nc, { timeout: 2_000 });
    for (let i = 0; i < 5; i++) await js.publish(`${p}.a`, `before ${i}`);

    // stop the stream leader, so publishing has to wait for a new election
    const leader = (await jsm.streams.info(stream)).cluster?.leader;
    const down = cluster.servers.findIndex((s) => s.name === leader);
    expect(down).toBeGreaterThanOrEqual(0);
    await cluster.stopNode(down);
    await eventually(() => js.publish(`${p}.a`, 'during 0', { msgID: `${p}-during-0` }), {
      timeoutMs: 15_000,
      intervalMs: 100,
      message: 'publish with one node down',
    });
    for (let i = 1; i < 5; i++) await js.publish(`${p}.a`, `during ${i}`);

    await cluster.restartNode(down);
    const info = await eventually(
      async () => {
        const si = await jsm.streams.info(stream);
        const peers = [si.cluster?.leader, ...(si.cluster?.replicas ?? []).map((r) => r.name)];
        const current = (si.cluster?.replicas ?? []).every((r) => r.current && !r.offline);
        return peers.filter(Boolean).length === 3 && current && si;
      },
      { timeoutMs: 15_000, intervalMs: 100, message: 'all 3 replicas current' },
    );
    expect(info.state.messages).toBe(10);
    expect(info.config.num_replicas).toBe(3);
  });
});
