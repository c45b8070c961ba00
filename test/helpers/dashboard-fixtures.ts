/**
 * Fixtures for the dashboard tests: an in-process Backend serving its HTTP port
 * (port 0, any free port) with the dashboard mounted, and small fetch helpers.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { Backend } from '../../src/backend/backend.js';
import type { Component } from '../../src/backend/backend.js';
import type { BackendContext } from '../../src/backend/context.js';
import { finalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import type { FinalizerPoolOptions } from '../../src/backend/finalize/finalizer-pool.js';
import { apiHandlers } from '../../src/backend/api/handlers/index.js';
import { reconcilerLoop } from '../../src/backend/reconciler/reconciler-loop.js';
import { loadConfig } from '../../src/config.js';
import type { SonarConfig } from '../../src/config.js';
import { dashboardComponent } from '../../src/http/dashboard/dashboard-component.js';
import { HttpComponent } from '../../src/http/http-component.js';
import type { Logger } from '../../src/log.js';
import { silentLogger } from '../../src/log.js';
import { createOutputStore } from '../../src/storage/create-output-store.js';
import { NO_IMDS } from './worker-fixtures.js';
import { freshPrefix } from './topology.js';

export interface DashboardBackend {
  backend: Backend;
  ctx: BackendContext;
  config: SonarConfig;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** The environment a worker process needs to reach this backend's topology. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export interface DashboardBackendOptions {
  env?: Record<string, string>;
  /** Run the reconciler (placement, recovery, leader). Default false: tests drive state. */
  reconciler?: boolean;
  finalizer?: FinalizerPoolOptions;
  log?: Logger;
}

/**
 * A Backend on a fresh prefix with the finalizer pool, optionally the reconciler, the
 * dashboard and the HTTP server: the same components `defaultParts` lists, in its order.
 */
export async function startDashboardBackend(
  natsUrl: string,
  nc: NatsConnection,
  opts: DashboardBackendOptions = {},
): Promise<DashboardBackend> {
  const env = {
    SONAR_NATS_URL: natsUrl,
    SONAR_PREFIX: freshPrefix(),
    SONAR_PULSE_INTERVAL: '200ms',
    SONAR_PULSE_TTL: '2s',
    SONAR_DRAIN_GRACE: '3s',
    SONAR_IMDS_URL: NO_IMDS,
    SONAR_HTTP_PORT: '0',
    ...opts.env,
  };
  const config = loadConfig(env);
  let http: HttpComponent | undefined;
  const components: ((ctx: BackendContext) => Component)[] = [
    finalizerPool(opts.finalizer),
    ...(opts.reconciler ? [reconcilerLoop()] : []),
    dashboardComponent(),
    (ctx) => (http = new HttpComponent(ctx, 0)),
  ];
  const backend = await Backend.start({
    config,
    nc,
    log: opts.log ?? silentLogger,
    parts: { handlers: apiHandlers, components, outputs: createOutputStore },
  });
  return {
    backend,
    ctx: backend.ctx,
    config,
    url: http!.server.url,
    env,
    stop: () => backend.stop(),
  };
}

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
