/**
 * Fixtures for the dashboard tests: an in-process Backend serving its HTTP port
 * (port 0, any free port) with the dashboard mounted, and small fetch helpers.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { finalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import type { FinalizerPoolOptions } from '../../src/backend/finalize/finalizer-pool.js';
import { reconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import { dashboardComponent } from '../../src/http/dashboard/dashboard-component.js';
import { httpComponent } from '../../src/http/http-component.js';
import type { Logger } from '../../src/log.js';
import { startBackend } from './test-backend.js';
import type { TestBackend } from './test-backend.js';
import { TEST_ENV } from './worker-fixtures.js';

export interface DashboardBackendOptions {
  env?: Record<string, string>;
  /** Run the reconciler (placement, recovery, leader). Default false: tests drive state. */
  reconciler?: boolean;
  finalizer?: FinalizerPoolOptions;
  log?: Logger;
}

/**
 * A backend on a fresh prefix with the finalizer pool, optionally the reconciler, the
 * dashboard and the HTTP server on any free port (its `url`): the same components
 * `defaultParts` lists, in its order.
 */
export const startDashboardBackend = (
  natsUrl: string,
  nc: NatsConnection,
  opts: DashboardBackendOptions = {},
): Promise<TestBackend> =>
  startBackend({
    url: natsUrl,
    nc,
    log: opts.log,
    env: { ...TEST_ENV, SONAR_HTTP_PORT: '0', ...opts.env },
    components: [
      finalizerPool(opts.finalizer),
      ...(opts.reconciler ? [reconcilerLoop()] : []),
      dashboardComponent(),
      httpComponent(),
    ],
  });

/** The wire form of a refusal. */
export interface ErrorReply {
  error: { code: string; message: string };
}

/**
 * GET or POST against the dashboard, returning status, headers and the parsed JSON (null when
 * the body is not JSON), typed as the caller expects it to be.
 */
export async function call<T = ErrorReply>(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; headers: Headers; text: string; json: T }> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch (_err: unknown) {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json: json as T };
}
