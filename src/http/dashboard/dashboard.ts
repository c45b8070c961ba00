import type { IncomingMessage, ServerResponse } from 'node:http';
import { KvWatchInclude, Kvm } from '@nats-io/kv';
import type { BackendContext } from '../../backend/context.js';
import { FailureLog } from '../../backend/finalize/index.js';
import { PoisonedAdmin } from '../../backend/finalize/index.js';
import type { Logger } from '../../log.js';
import { DashboardActions } from './actions.js';
import { apiRoutes } from './api-routes.js';
import { DashboardAuth, isLocalHost, isSameOrigin } from './auth.js';
import { clientAddress } from './client-address.js';
import { DashboardData } from './dashboard-data.js';
import {
  BodyTooLarge,
  errorBody,
  redirect,
  sendJson,
  sendProblem,
  sendTooManyAttempts,
} from './http-util.js';
import { DEFAULT_LOGIN_LIMIT, LoginLimiter } from './login-limiter.js';
import { isPublicPath, pageRoutes } from './page-routes.js';
import { Router } from './router.js';
import { SessionStore } from './session-store.js';
import { EventHub } from './sse-hub.js';
import type { EventHubOptions } from './sse-hub.js';

export interface DashboardOptions {
  hub?: EventHubOptions;
  /** `by` of `TaskFinalizeRetried` from the dashboard. @defaultValue `dashboard@<nodeId>` */
  by?: string;
}

/**
 * The web dashboard as one request handler for the backend's HTTP port: pages,
 * the read API, SSE, actions. It reads this backend's projection, goes live from its event
 * stream (`loop.onApplied`), and acts through the same code as the CLI.
 *
 * `handle` answers the requests it knows and returns false for the others, so the HTTP
 * server can mount it beside its own routes (dashboard-component.ts does).
 */
export class Dashboard {
  private readonly router = new Router();
  private readonly log: Logger;
  private stopWatch: (() => void) | null = null;

  private constructor(
    private readonly ctx: BackendContext,
    private readonly data: DashboardData,
    private readonly hub: EventHub,
    private readonly auth: DashboardAuth,
    private readonly limiter: LoginLimiter,
  ) {
    this.log = ctx.log.child({ component: 'dashboard' });
  }

  static async open(ctx: BackendContext, opts: DashboardOptions = {}): Promise<Dashboard> {
    const admin = new PoisonedAdmin({
      names: ctx.names,
      js: ctx.js,
      jsm: ctx.jsm,
      loop: ctx.loop,
      writer: ctx.writer,
      failures: await FailureLog.open(ctx.nc, ctx.names),
    });
    const data = await DashboardData.open(ctx, admin);
    const hub = new EventHub(ctx.loop, opts.hub);
    const { httpToken, sessionTtlMs, httpSecureCookie } = ctx.config;
    const auth = new DashboardAuth({
      token: httpToken,
      sessions:
        httpToken === undefined
          ? undefined
          : await SessionStore.open(ctx.nc, ctx.names, sessionTtlMs, ctx.now),
      secureCookie: httpSecureCookie,
    });
    const limiter = new LoginLimiter({ ...DEFAULT_LOGIN_LIMIT, now: ctx.now });
    const d = new Dashboard(ctx, data, hub, auth, limiter);
    const actions = new DashboardActions(ctx, opts.by ?? `dashboard@${ctx.nodeId}`);
    const addressOf = (req: IncomingMessage) => clientAddress(req, ctx.config.httpTrustedProxies);
    pageRoutes(d.router, { data, hub, auth, limiter, addressOf });
    apiRoutes(d.router, { data, hub, actions });
    hub.start();
    await d.watchRegistry();
    return d;
  }

  /** Ends the SSE streams, the registry watch and the listeners (on backend shutdown). */
  close(): void {
    this.stopWatch?.();
    this.hub.stop();
    this.data.close();
  }

  get streams(): number {
    return this.hub.clientCount;
  }

  /** Serves `req` when it is the dashboard's; false to let another route take it. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const method = req.method ?? 'GET';
    const route = this.router.match(method, url.pathname);
    if (route === null) return false;
    if (!this.auth.enabled && !isLocalHost(req.headers.host)) {
      sendProblem(res, 403, 'forbidden', 'without SONAR_HTTP_TOKEN only localhost is served');
      return true;
    }
    if (!isPublicPath(url.pathname)) {
      const allowed = await this.authorize(req, res, method, url.pathname);
      if (!allowed) return true;
    }
    if (route === 'method-not-allowed') {
      sendProblem(res, 405, 'method_not_allowed', `${method} is not allowed on ${url.pathname}`);
      return true;
    }
    if (method === 'POST' && !isSameOrigin(req)) {
      sendProblem(res, 403, 'forbidden', 'cross-origin requests are refused');
      return true;
    }
    try {
      await route.handler({ req, res, url, params: route.params });
    } catch (err: unknown) {
      this.fail(res, err, method, url.pathname);
    }
    return true;
  }

  /**
   * Lets the request through when it carries the token or a live session; otherwise answers
   * it (401 for the API and actions, a redirect to the login page for pages) and returns
   * false. A wrong bearer token counts as a failed login of its client address, and an
   * address past the limit is refused (429) before its token is judged.
   */
  private async authorize(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    path: string,
  ): Promise<boolean> {
    const address = clientAddress(req, this.ctx.config.httpTrustedProxies);
    if (req.headers.authorization !== undefined && this.auth.enabled) {
      const wait = this.limiter.retryAfterMs(address);
      if (wait > 0) {
        sendTooManyAttempts(res, wait);
        return false;
      }
    }
    let credential;
    try {
      credential = await this.auth.check(req);
    } catch (err: unknown) {
      this.fail(res, err, method, path);
      return false;
    }
    if (credential === 'ok') return true;
    if (credential === 'bad-token') this.limiter.failed(address);
    if (path.startsWith('/api/') || method !== 'GET') {
      res.setHeader('www-authenticate', 'Bearer realm="sonar"');
      sendProblem(res, 401, 'unauthorized', 'a valid SONAR_HTTP_TOKEN is required');
    } else {
      const url = new URL(req.url ?? '/', 'http://localhost');
      redirect(res, `/login?next=${encodeURIComponent(url.pathname + url.search)}`);
    }
    return false;
  }

  private fail(res: ServerResponse, err: unknown, method: string, path: string): void {
    if (err instanceof BodyTooLarge) {
      if (!res.headersSent) sendProblem(res, 413, 'too_large', err.message);
      return;
    }
    const { status, body } = errorBody(err);
    // Only the method and path are logged: headers hold the token or the session cookie.
    if (status >= 500) this.log.error('dashboard request failed', { method, path, err });
    if (res.headersSent) res.end();
    else sendJson(res, status, body);
  }

  /** Pulses are not events: a KV watch tells the Overview that slots or pulses changed. */
  private async watchRegistry(): Promise<void> {
    try {
      const kv = await new Kvm(this.ctx.nc).open(this.ctx.names.buckets.workers);
      const watch = await kv.watch({ include: KvWatchInclude.UpdatesOnly, headers_only: true });
      this.stopWatch = () => watch.stop();
      void (async () => {
        for await (const _e of watch) this.hub.registryChanged();
      })().catch((err: unknown) => this.log.warn('registry watch ended', { err }));
    } catch (err: unknown) {
      // Without it the Overview still goes live on events; pulse ages tick in the browser.
      this.log.warn('registry watch not started', { err });
    }
  }
}
