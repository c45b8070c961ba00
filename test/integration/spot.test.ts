import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import { ImdsClient, parseSpotNotice } from '../../src/worker/spot-notice.js';
import { createWorker } from '../../src/worker/worker.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { dispatchRun, eventsOf, spawnWorker, taskOf } from '../helpers/worker-fixtures.js';

/** A small stand-in of EC2's IMDSv2: session tokens, instance id, spot instance-action. */
class ImdsStandIn {
  readonly tokens = new Set<string>();
  notice: { action: string; time: string } | null = null;
  tokenPuts = 0;
  ttlHeaders: string[] = [];
  private server: Server | null = null;

  async start(): Promise<string> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Every token issued so far stops working (they expired). */
  expireTokens(): void {
    this.tokens.clear();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (req.method === 'PUT' && req.url === '/latest/api/token') {
      const ttl = req.headers['x-aws-ec2-metadata-token-ttl-seconds'];
      if (typeof ttl !== 'string') return void res.writeHead(400).end();
      this.ttlHeaders.push(ttl);
      const token = `tok-${++this.tokenPuts}`;
      this.tokens.add(token);
      return void res.writeHead(200).end(token);
    }
    const token = req.headers['x-aws-ec2-metadata-token'];
    if (req.method !== 'GET' || typeof token !== 'string' || !this.tokens.has(token)) {
      return void res.writeHead(401).end();
    }
    if (req.url === '/latest/meta-data/instance-id') return void res.writeHead(200).end('i-0123');
    if (req.url === '/latest/meta-data/spot/instance-action' && this.notice) {
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(this.notice));
    }
    res.writeHead(404).end();
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    );
  }
}

const nats = serverPerFile();
const backends = backendPerTest(nats);
let imds: ImdsStandIn;
let imdsUrl: string;

afterEach(async () => {
  await imds?.stop();
});

async function world() {
  imds = new ImdsStandIn();
  imdsUrl = await imds.start();
  const tb = await backends.start({ SONAR_IMDS_URL: imdsUrl });
  return { tb, ctx: tb.ctx, client: new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix }) };
}

describe('ImdsClient', () => {
  it('asks for a token with its TTL header, and refreshes it when IMDS answers 401', async () => {
    await world();
    const client = new ImdsClient(imdsUrl);
    expect(await client.get('/latest/meta-data/spot/instance-action')).toBeNull();
    expect(await client.get('/latest/meta-data/instance-id')).toBe('i-0123');
    expect(imds.tokenPuts).toBe(1);
    imds.expireTokens();
    expect(await client.get('/latest/meta-data/instance-id')).toBe('i-0123');
    expect(imds.tokenPuts).toBe(2);
    expect(imds.ttlHeaders.every((h) => Number(h) > 0)).toBe(true);
    expect(await new ImdsClient('http://127.0.0.1:9', 300).available()).toBe(false);
    expect(parseSpotNotice('{"action":"stop","time":"2026-01-01T00:00:00Z"}')).toEqual({
      action: 'stop',
      time: '2026-01-01T00:00:00Z',
    });
    expect(parseSpotNotice('{"action":"stop"}')).toBeNull();
  });
});

describe('spot interruption', () => {
  it('drains a --spot worker process before the notice deadline', async () => {
    const { tb, ctx, client } = await world();
    const w = spawnWorker(tb.env, ['--worker-id', 'w1', '--tags', 'a', '--slots', '1', '--spot'], {
      SONAR_SPOT_MARGIN: '10s',
      SONAR_DRAIN_GRACE: '60s',
    });
    await eventually(() => ctx.loop.projection.workers.get('w1')?.snapshot.value === 'Active', {
      timeoutMs: 15_000,
    });
    await client.submit({
      runId: 'r1',
      steps: [{ id: 's', tags: ['a'], tasks: [{ id: 'long', command: ['sleep', '30'] }] }],
    });
    await dispatchRun(ctx, 'r1');
    await eventually(() => taskOf(ctx, 'r1', 'long').value === 'Running');
    const noticeAt = Date.now() + 18_000;
    imds.notice = { action: 'terminate', time: new Date(noticeAt).toISOString() };
    const r = await w.exited;
    expect(r.code).toBe(0);
    expect(Date.now()).toBeLessThan(noticeAt);
    const events = await eventsOf(ctx, ctx.names.subjects.worker('w1'));
    expect(events.map((e) => e.type)).toEqual(['WorkerJoined', 'WorkerDraining', 'WorkerLeft']);
    expect(events[0]!.data).toMatchObject({ instanceId: 'i-0123' });
    expect(events[1]!.data).toEqual({
      reason: 'spot-interruption',
      deadline: new Date(noticeAt - 10_000).toISOString(),
    });
    expect(Date.parse(events[2]!.time)).toBeLessThan(noticeAt);
    const requeued = (await eventsOf(ctx, ctx.names.subjects.task('r1', 'long'))).find(
      (e) => e.type === 'TaskRequeued',
    );
    expect(requeued?.data).toMatchObject({ reason: 'worker-released' });
  });

  it("turns itself on when IMDS answers ('auto') and drains on a notice", async () => {
    const { ctx } = await world();
    const worker = createWorker({
      tags: ['a'],
      handler: () => 'ok',
      nc: nats.nc,
      prefix: ctx.names.prefix,
      spot: 'auto',
      imdsUrl,
      spotPollMs: 100,
      spotMarginMs: '1s',
    });
    await worker.start();
    imds.notice = { action: 'stop', time: new Date(Date.now() + 1_500).toISOString() };
    await worker.done;
    expect(worker.state).toBe('Stopped');
    const events = await eventsOf(ctx, ctx.names.subjects.worker(worker.workerId));
    expect(events.map((e) => e.type)).toEqual(['WorkerJoined', 'WorkerDraining', 'WorkerLeft']);
    expect(events[1]!.data).toMatchObject({ reason: 'spot-interruption' });
  });
});
