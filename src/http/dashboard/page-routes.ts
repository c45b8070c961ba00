import type { IncomingMessage } from 'node:http';
import type { DashboardAuth } from './auth.js';
import { appJs } from './assets/app-js.js';
import type { Asset } from './assets/asset.js';
import { STYLE_CSS } from './assets/style-css.js';
import type { DashboardData } from './dashboard-data.js';
import { html } from './html.js';
import type { Html } from './html.js';
import { readBody, redirect, send, sendHtml, sendTooManyAttempts } from './http-util.js';
import type { LoginLimiter } from './login-limiter.js';
import { eventsMain } from './pages/events-page.js';
import { layout } from './pages/layout.js';
import type { PageOptions } from './pages/layout.js';
import { loginMain } from './pages/login-page.js';
import { overviewMain } from './pages/overview-page.js';
import { poisonedMain } from './pages/poisoned-page.js';
import { runMain } from './pages/run-page.js';
import { runsMain } from './pages/runs-page.js';
import { schedulesMain } from './pages/schedules-page.js';
import { taskMain } from './pages/task-page.js';
import { filterParams, idParam } from './params.js';
import type { RouteContext, Router } from './router.js';
import { safeNext } from './safe-next.js';
import type { EventHub } from './sse-hub.js';
import { publicEvent } from './views/public-event.js';

export interface PageDeps {
  data: DashboardData;
  hub: EventHub;
  auth: DashboardAuth;
  /** Failed logins per client address. */
  limiter: LoginLimiter;
  /** The client address a request counts against (client-address.ts). */
  addressOf: (req: IncomingMessage) => string;
}

/** Asked by the client script when it refreshes a live page: only `<main>` is sent back. */
const FRAGMENT_HEADER = 'x-sonar-fragment';

const isFragment = (req: IncomingMessage) => req.headers[FRAGMENT_HEADER] === '1';

/** A stream URL with its query; values are ids or event types (already validated). */
function streamUrl(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  return `/api/stream?${q.toString()}`;
}

/**
 * Long-lived assets: the ETag is the content's hash, so a new version is fetched at once.
 * `body` may be made on the first request (the script is transpiled then, not at import).
 */
function asset(of: Asset | (() => Asset), type: string) {
  return ({ req, res }: RouteContext) => {
    const body = typeof of === 'function' ? of() : of;
    if (req.headers['if-none-match'] === body.etag) {
      res.writeHead(304, { etag: body.etag });
      res.end();
      return;
    }
    send(res, 200, type, body.text, { etag: body.etag, 'cache-control': 'no-cache' });
  };
}

/** The HTML pages: server-rendered, made live by `/assets/app.js` over SSE. */
export function pageRoutes(router: Router, deps: PageDeps): void {
  const { data, hub, auth, limiter, addressOf } = deps;
  const page = (rc: RouteContext, opts: PageOptions, main: Html, status = 200) => {
    // The navigation is not part of <main>: its poisoned count travels in a header.
    if (isFragment(rc.req)) {
      sendHtml(rc.res, status, main, { 'x-sonar-poisoned': String(data.poisonedCount) });
    } else {
      const full = { ...opts, poisoned: data.poisonedCount, loggedIn: auth.enabled };
      sendHtml(rc.res, status, layout(full, main));
    }
  };
  const notFoundPage = (rc: RouteContext, what: string) =>
    page(rc, { page: 'runs', title: 'Not found' }, html`<p class="warn">No ${what}.</p>`, 404);

  router
    .get('/assets/style.css', asset(STYLE_CSS, 'text/css; charset=utf-8'))
    .get('/assets/app.js', asset(appJs, 'text/javascript; charset=utf-8'))
    .get('/', async (rc) => {
      const stream = streamUrl({ mode: 'changes', registry: 1 });
      page(
        rc,
        { page: 'overview', title: 'Overview', stream },
        overviewMain(await data.overview()),
      );
    })
    .get('/runs', (rc) => {
      const stream = streamUrl({ mode: 'changes' });
      page(rc, { page: 'runs', title: 'Runs', stream }, runsMain(data.runs(200)));
    })
    .get('/schedules', (rc) => {
      const stream = streamUrl({ mode: 'changes' });
      page(rc, { page: 'schedules', title: 'Schedules', stream }, schedulesMain(data.schedules()));
    })
    .get('/runs/:runId', async (rc) => {
      const runId = idParam('runId', rc.params['runId']);
      const run = await data.run(runId, 200);
      if (!run) return notFoundPage(rc, `run ${runId}`);
      const stream = streamUrl({ mode: 'changes', run: runId });
      const now = new Date().toISOString();
      page(rc, { page: 'run', title: `Run ${runId}`, stream }, runMain(run, now));
    })
    .get('/tasks/:runId/:taskId', async (rc) => {
      const runId = idParam('runId', rc.params['runId']);
      const taskId = idParam('taskId', rc.params['taskId']);
      const task = await data.task(runId, taskId);
      if (!task) return notFoundPage(rc, `task ${runId}.${taskId}`);
      const stream = streamUrl({ mode: 'changes', run: runId, task: taskId });
      const reports = await data.taskReports(runId, taskId, task.attempt);
      page(rc, { page: 'task', title: `Task ${task.task}`, stream }, taskMain(task, reports));
    })
    .get('/events', (rc) => {
      const filter = filterParams(rc.url.searchParams);
      const recent = hub.recent(filter, 200);
      const after = recent.length > 0 ? recent[recent.length - 1]!.seq : undefined;
      const stream = streamUrl({ mode: 'events', ...filter, after });
      page(
        rc,
        { page: 'events', title: 'Events', stream },
        eventsMain(filter, recent.map(publicEvent)),
      );
    })
    .get('/poisoned', async (rc) => {
      const { total, tasks } = await data.poisoned(50);
      const stream = streamUrl({ mode: 'changes' });
      page(rc, { page: 'poisoned', title: 'Poisoned', stream }, poisonedMain(tasks, total));
    })
    .get('/login', (rc) => {
      const next = safeNext(rc.url.searchParams.get('next'));
      const failed = rc.url.searchParams.get('failed') === '1';
      sendHtml(rc.res, 200, layout({ page: 'login', title: 'Log in' }, loginMain(failed, next)));
    })
    .post('/login', async ({ req, res }) => {
      const form = new URLSearchParams(await readBody(req, 4096));
      const next = safeNext(form.get('next'));
      if (!auth.enabled) return redirect(res, next);
      // Refused before the token is judged: a guess past the limit learns nothing.
      const address = addressOf(req);
      const wait = limiter.retryAfterMs(address);
      if (wait > 0) return sendTooManyAttempts(res, wait);
      if (!auth.accepts(form.get('token') ?? '')) {
        limiter.failed(address);
        return redirect(res, `/login?failed=1&next=${encodeURIComponent(next)}`);
      }
      redirect(res, next, { 'set-cookie': await auth.login(req) });
    })
    .post('/logout', async ({ req, res }) => {
      redirect(res, '/login', { 'set-cookie': await auth.logout(req) });
    });
}

/**
 * Reachable without the token: the login form and the assets it needs (nothing secret), and
 * the logout, which only ends the session its cookie names, so that a session already
 * expired still gets its cookie cleared (cross-site posts are refused like any other).
 */
export const isPublicPath = (pathname: string): boolean =>
  pathname.startsWith('/assets/') || pathname === '/login' || pathname === '/logout';
