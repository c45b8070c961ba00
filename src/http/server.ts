import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from '../log.js';
import { silentLogger } from '../log.js';
import { ValidationError } from '../../actors/errors.js';

/**
 * A route handler. `url` is the parsed request URL (path and query). Throwing (or rejecting)
 * answers 500 with the error's message; a handler that answered nothing is ended for it.
 */
export type HttpHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
) => void | Promise<void>;

interface Route {
  method: string;
  path: string;
  prefix: boolean;
  handler: HttpHandler;
}

export interface HttpServerOptions {
  port: number;
  /** @defaultValue `127.0.0.1`: only this machine, unless an operator opens it up. */
  host?: string;
  log?: Logger;
}

/** Sends a JSON body with a status code. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * The backend's one HTTP server (DESIGN.md section 9, `SONAR_HTTP_PORT`): `node:http` with a
 * tiny router, no framework. Health, readiness and metrics are registered by
 * src/http/http-component.ts; the dashboard mounts its own routes the same way (see
 * src/http/routes.ts).
 *
 * Routing: `route('GET', '/metrics', h)` matches that path exactly; a path ending in `/`
 * (`route('GET', '/dashboard/', h)`) matches everything under it. The longest matching path
 * wins, and `*` as the method matches any method. No match: 404; the longest matching path
 * known only under other methods: 405.
 */
export class HttpServer {
  private readonly routes: Route[] = [];
  private server: Server | null = null;
  private readonly log: Logger;

  constructor(private readonly opts: HttpServerOptions) {
    this.log = opts.log ?? silentLogger;
  }

  /** Adds a route; see the class comment for matching. Returns this, for chaining. */
  route(method: string, path: string, handler: HttpHandler): this {
    if (!path.startsWith('/'))
      throw new ValidationError(`http route path must start with /, got ${path}`);
    this.routes.push({ method: method.toUpperCase(), path, prefix: path.endsWith('/'), handler });
    // Longest path first, so `/api/runs/` wins over `/api/`.
    this.routes.sort((a, b) => b.path.length - a.path.length);
    return this;
  }

  /** The port actually bound (useful with port 0); -1 before `start()`. */
  get port(): number {
    const addr = this.server?.address();
    return addr && typeof addr === 'object' ? addr.port : -1;
  }

  get url(): string {
    return `http://${this.opts.host ?? '127.0.0.1'}:${this.port}`;
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    // A scrape or probe that hangs must not hold a shutdown.
    server.requestTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // Keep-alive connections (a browser, a scraper) would hold close() open.
    server.closeAllConnections();
    await closed;
  }

  private match(method: string, path: string): Route | 'wrong-method' | null {
    // The longest matching path decides: a shorter catch-all never takes a known path's
    // other methods (POST /metrics is 405, not the dashboard's).
    let matched: string | null = null;
    for (const r of this.routes) {
      if (matched !== null && r.path !== matched) break;
      const hit = r.prefix ? path.startsWith(r.path) || `${path}/` === r.path : path === r.path;
      if (!hit) continue;
      if (r.method === '*' || r.method === method || (r.method === 'GET' && method === 'HEAD')) {
        return r;
      }
      matched = r.path;
    }
    return matched !== null ? 'wrong-method' : null;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = this.match(req.method ?? 'GET', url.pathname);
    if (route === null) {
      sendJson(res, 404, { error: { code: 'not_found', message: `no route ${url.pathname}` } });
      return;
    }
    if (route === 'wrong-method') {
      sendJson(res, 405, {
        error: { code: 'validation', message: `${req.method} is not allowed on ${url.pathname}` },
      });
      return;
    }
    try {
      await route.handler(req, res, url);
      if (!res.writableEnded && !res.headersSent) res.writeHead(204);
      if (!res.writableEnded) res.end();
    } catch (err: unknown) {
      const message = err instanceof Error ? err.message : String(err);
      this.log.warn('http handler failed', { path: url.pathname, err });
      if (!res.headersSent) sendJson(res, 500, { error: { code: 'unavailable', message } });
      else res.end();
    }
  }
}
