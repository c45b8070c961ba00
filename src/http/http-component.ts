import type { Component } from '../backend/backend.js';
import { BackendMetrics } from '../backend/backend-metrics.js';
import type { BackendContext } from '../backend/context.js';
import { eventsStoreRoom } from '../backend/storage/index.js';
import { registeredHttpRoutes } from './routes.js';
import type { HttpRoutes } from './routes.js';
import { HttpServer, sendJson } from './server.js';
import { assertHttpExposure } from './exposure.js';
import { settleWithin } from '../grace.js';

export interface HttpComponentOptions {
  /**
   * Routes mounted besides the registered ones (src/http/routes.ts); neither is mounted in
   * probes-only mode (`SONAR_DASHBOARD=off`).
   * @defaultValue none
   */
  routes?: HttpRoutes[];
}

/** `/readyz` fails while the projection has more events than this left to apply. */
export const READY_LAG_BOUND = 10_000;
/** A lag reading not answered within this counts as not ready. */
const LAG_READ_TIMEOUT_MS = 1_000;

/**
 * The backend's HTTP server as a component: `/healthz`, `/readyz`, `/metrics` (Prometheus
 * text), plus every registered route. Runs only when `SONAR_HTTP_PORT` (or `--http-port`)
 * is set.
 *
 * With `SONAR_DASHBOARD=off` (probes-only mode) nothing else is mounted: every other path is
 * 404, so the port may bind any address without a token. With the dashboard on, a bind
 * beyond loopback needs `SONAR_HTTP_TOKEN` ({@link assertHttpExposure} refuses to start).
 *
 * - `/readyz` (send me requests): connected, JetStream answering, the projection caught up
 *   once and now no more than {@link READY_LAG_BOUND} events behind its stream.
 * - `/healthz` (do not restart me): fails only when a restart would help (the connection
 *   closed for good, the projection loop stopped, a reconcile pass stuck while the server
 *   answers: src/backend/reconciler/liveness.ts), never merely because NATS is out of reach, so that
 *   liveness restarts never feed an outage.
 */
export class HttpComponent implements Component {
  readonly name = 'http';
  readonly server: HttpServer;
  readonly metrics: BackendMetrics;

  constructor(
    private readonly ctx: BackendContext,
    port: number,
    private readonly opts: HttpComponentOptions = {},
  ) {
    assertHttpExposure(ctx.config);
    this.server = new HttpServer({
      port,
      host: ctx.config.httpHost,
      log: ctx.log.child({ component: 'http' }),
    });
    this.metrics = new BackendMetrics(ctx);
  }

  /** What `/readyz` checks; all must hold. */
  async readiness(): Promise<{
    ready: boolean;
    checks: Record<string, boolean>;
    lag: number | null;
    storeFull: boolean | null;
  }> {
    const { contact, loop } = this.ctx;
    const connected = contact.connection.connected;
    const lag = connected && loop.caughtUp ? await this.lag() : null;
    const checks = {
      connected,
      jetstream: connected && contact.jetstream,
      // Backend.start provisions the topology before starting components.
      topology: true,
      caughtUp: loop.caughtUp,
      projection: lag !== null && lag <= READY_LAG_BOUND && loop.stoppedWith === null,
    };
    // A full event log refuses new work only: the backend still serves running tasks, so it
    // stays ready and says so in a field of its own (null when unknown or unbounded).
    const storeFull = connected ? await this.storeFull() : null;
    return { ready: Object.values(checks).every(Boolean), checks, lag, storeFull };
  }

  private async storeFull(): Promise<boolean | null> {
    const read = eventsStoreRoom(this.ctx)
      .room()
      .then((r) => r.full)
      .catch(() => null);
    return (await settleWithin(read, LAG_READ_TIMEOUT_MS)) === 'done' ? read : null;
  }

  /**
   * Events the projection still has to apply (at most: a hole a purge left counts), or null
   * when the server does not say.
   */
  private async lag(): Promise<number | null> {
    const { loop, store } = this.ctx;
    const read = store.endSeq(loop.position).then(
      (end) => Math.max(0, end - loop.position),
      () => null,
    );
    return (await settleWithin(read, LAG_READ_TIMEOUT_MS)) === 'done' ? read : null;
  }

  /** What `/healthz` checks: the problems a restart would mend. */
  liveness(): { live: boolean; problems: Record<string, string> } {
    const problems = this.ctx.liveness.problems();
    return { live: Object.keys(problems).length === 0, problems };
  }

  async start(): Promise<void> {
    const { server, ctx } = this;
    server
      .route('GET', '/healthz', (_req, res) => {
        const l = this.liveness();
        sendJson(
          res,
          l.live ? 200 : 503,
          l.live ? { ok: true } : { ok: false, problems: l.problems },
        );
      })
      .route('GET', '/readyz', async (_req, res) => {
        const r = await this.readiness();
        sendJson(res, r.ready ? 200 : 503, r);
      })
      .route('GET', '/metrics', async (_req, res) => {
        const text = await this.metrics.scrape();
        res.writeHead(200, { 'content-type': this.metrics.contentType });
        res.end(text);
      });
    if (ctx.config.dashboard) {
      for (const install of [...registeredHttpRoutes(), ...(this.opts.routes ?? [])]) {
        install(server, ctx);
      }
    }
    await server.start();
    ctx.log.info('http server listening', { url: server.url });
  }

  async stop(): Promise<void> {
    this.metrics.close();
    await this.server.stop();
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
