import type { BackendContext } from '../backend/context.js';
import type { HttpServer } from './server.js';

/**
 * Adds routes to the backend's HTTP server. Called once per server, at its start, after the
 * built-in `/healthz`, `/readyz` and `/metrics`, with the backend's context (projection,
 * registry, connection...).
 */
export type HttpRoutes = (server: HttpServer, ctx: BackendContext) => void;

const installers: HttpRoutes[] = [];

/**
 * The hook for features that serve HTTP (the dashboard and its API): register once, at module
 * load, and make sure the module is imported by the backend (e.g. one import line in
 * src/default-parts.ts). Every HTTP server started afterwards mounts the routes:
 *
 * ```ts
 * registerHttpRoutes((server, ctx) => {
 *   server.route('GET', '/api/runs', (_req, res) => sendJson(res, 200, listRuns(ctx)));
 *   server.route('GET', '/dashboard/', serveStatic);
 * });
 * ```
 *
 * The component also takes routes in its options (`httpComponent({ routes: [...] })`), for
 * tests and for parts lists that want no global registration.
 */
export function registerHttpRoutes(install: HttpRoutes): void {
  installers.push(install);
}

/** Every registered installer, in registration order. */
export function registeredHttpRoutes(): readonly HttpRoutes[] {
  return installers;
}
