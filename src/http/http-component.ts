import type { Component } from '../backend/backend.js';
import { BackendMetrics } from '../backend/backend-metrics.js';
import type { BackendContext } from '../backend/context.js';
import { registeredHttpRoutes } from './routes.js';
import type { HttpRoutes } from './routes.js';
import { HttpServer, sendJson } from './server.js';

export interface HttpComponentOptions {
  /**
   * Routes mounted besides the registered ones (src/http/routes.ts).
   * @defaultValue none
   */
  routes?: HttpRoutes[];
}

/**
 * The backend's HTTP server as a component (issue 6): `/healthz` (the process is up),
 * `/readyz` (connected to NATS; the topology was provisioned and the projection replayed
 * before any component starts, so a started server has both), `/metrics` (Prometheus text),
 * plus every registered route. Runs only when `SONAR_HTTP_PORT` (or `--http-port`) is set.
 */
export class HttpComponent implements Component {
  readonly name = 'http';
  readonly server: HttpServer;
  readonly metrics: BackendMetrics;
  private connected = true;

  constructor(
    private readonly ctx: BackendContext,
    port: number,
    private readonly opts: HttpComponentOptions = {},
  ) {
    this.server = new HttpServer({
      port,
      host: ctx.config.httpHost,
      log: ctx.log.child({ component: 'http' }),
    });
    this.metrics = new BackendMetrics(ctx);
  }

  /** What `/readyz` checks; all must hold. */
  readiness(): { ready: boolean; checks: Record<string, boolean> } {
    const checks = {
      connected: this.connected && !this.ctx.nc.isClosed(),
      // Backend.start provisions the topology and replays before starting components.
      topology: true,
      projection: this.ctx.loop.position >= 0,
    };
    return { ready: Object.values(checks).every(Boolean), checks };
  }

  async start(): Promise<void> {
    const { server, ctx } = this;
    server
      .route('GET', '/healthz', (_req, res) => sendJson(res, 200, { ok: true }))
      .route('GET', '/readyz', (_req, res) => {
        const r = this.readiness();
        sendJson(res, r.ready ? 200 : 503, r);
      })
      .route('GET', '/metrics', async (_req, res) => {
        const text = await this.metrics.scrape();
        res.writeHead(200, { 'content-type': this.metrics.contentType });
        res.end(text);
      });
    for (const install of [...registeredHttpRoutes(), ...(this.opts.routes ?? [])]) {
      install(server, ctx);
    }
    void this.watchConnection();
    await server.start();
    ctx.log.info('http server listening', { url: server.url });
  }

  async stop(): Promise<void> {
    this.metrics.close();
    await this.server.stop();
  }

  /** Tracks disconnects, so `/readyz` fails while NATS is unreachable. */
  private async watchConnection(): Promise<void> {
    try {
      for await (const s of this.ctx.nc.status()) {
        if (s.type === 'disconnect') this.connected = false;
        else if (s.type === 'reconnect') this.connected = true;
      }
    } catch (_err: unknown) {
      // The status iterator ends with the connection.
    }
  }
}

const idle: Component = { name: 'http', start: () => {}, stop: () => Promise.resolve() };

/**
 * The factory `defaultParts` registers: an {@link HttpComponent} when `SONAR_HTTP_PORT` is
 * set, else a component that does nothing.
 */
export const httpComponent =
  (opts: HttpComponentOptions = {}) =>
  (ctx: BackendContext): Component =>
    ctx.config.httpPort === undefined ? idle : new HttpComponent(ctx, ctx.config.httpPort, opts);
