import type { IncomingMessage, ServerResponse } from 'node:http';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** Path parameters, URL-decoded (`/runs/:runId` gives `runId`). */
  params: Record<string, string>;
}

type RouteHandler = (rc: RouteContext) => Promise<void> | void;

interface Route {
  method: 'GET' | 'POST';
  pattern: RegExp;
  keys: string[];
  handler: RouteHandler;
}

/** A small table of `METHOD /path/:param` routes; one concept, no dependency. */
export class Router {
  private readonly routes: Route[] = [];

  get(path: string, handler: RouteHandler): this {
    return this.add('GET', path, handler);
  }

  post(path: string, handler: RouteHandler): this {
    return this.add('POST', path, handler);
  }

  private add(method: Route['method'], path: string, handler: RouteHandler): this {
    const keys: string[] = [];
    const source = path
      .split('/')
      .map((part) => {
        if (!part.startsWith(':')) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        keys.push(part.slice(1));
        return '([^/]+)';
      })
      .join('/');
    this.routes.push({ method, pattern: new RegExp(`^${source}$`), keys, handler });
    return this;
  }

  /**
   * The route for a request: `handler` with its params, `method-not-allowed` when only the
   * path matches, or null when nothing does (not the dashboard's: another part may serve it).
   */
  match(
    method: string,
    pathname: string,
  ): { handler: RouteHandler; params: Record<string, string> } | 'method-not-allowed' | null {
    let pathMatched = false;
    for (const r of this.routes) {
      const m = r.pattern.exec(pathname);
      if (!m) continue;
      pathMatched = true;
      if (r.method !== method && !(r.method === 'GET' && method === 'HEAD')) continue;
      const params: Record<string, string> = {};
      r.keys.forEach((k, i) => {
        params[k] = safeDecode(m[i + 1] ?? '');
      });
      return { handler: r.handler, params };
    }
    return pathMatched ? 'method-not-allowed' : null;
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch (_err: unknown) {
    return s; // a bad escape stays as it is, and then fails id validation
  }
}
