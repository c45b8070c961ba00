import type { Component } from '../../backend/backend.js';
import type { BackendContext } from '../../backend/context.js';
import { registerHttpRoutes } from '../routes.js';
import { sendJson } from '../server.js';
import { Dashboard } from './dashboard.js';
import type { DashboardOptions } from './dashboard.js';

/** The open dashboard of each backend, for the routes mounted on its HTTP server. */
const open = new WeakMap<BackendContext, Dashboard>();

/**
 * Mounted under `/` for any method: the HTTP server's longest match wins, so `/healthz`,
 * `/readyz` and `/metrics` keep their own handlers and everything else comes here. Paths the
 * dashboard does not know get the server's usual 404.
 */
registerHttpRoutes((server, ctx) => {
  server.route('*', '/', async (req, res, url) => {
    const dashboard = open.get(ctx);
    if (dashboard && (await dashboard.handle(req, res))) return;
    sendJson(res, 404, { error: { code: 'not_found', message: `no route ${url.pathname}` } });
  });
});

/**
 * The dashboard as a backend component. It opens before the HTTP component starts
 * (listed before it in `defaultParts`) and closes after it stops, ending its SSE streams and
 * its registry watch. Idle when `SONAR_HTTP_PORT` is unset, like the HTTP server, and in
 * probes-only mode (`SONAR_DASHBOARD=off`).
 */
export class DashboardComponent implements Component {
  readonly name = 'dashboard';
  private dashboard: Dashboard | null = null;

  constructor(
    private readonly ctx: BackendContext,
    private readonly opts: DashboardOptions = {},
  ) {}

  async start(): Promise<void> {
    const { httpPort, dashboard } = this.ctx.config;
    if (httpPort === undefined || !dashboard) return;
    this.dashboard = await Dashboard.open(this.ctx, this.opts);
    open.set(this.ctx, this.dashboard);
  }

  stop(): Promise<void> {
    open.delete(this.ctx);
    this.dashboard?.close();
    this.dashboard = null;
    return Promise.resolve();
  }
}

/** The factory `defaultParts` lists, before `httpComponent()`. */
export const dashboardComponent =
  (opts: DashboardOptions = {}) =>
  (ctx: BackendContext): Component =>
    new DashboardComponent(ctx, opts);
