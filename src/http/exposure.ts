import { ConfigError } from '../config.js';
import type { ConfigProblem, SonarConfig } from '../config.js';
import { isLoopback } from './loopback.js';

/** The address the HTTP server binds when `SONAR_HTTP_HOST` is unset. */
export const DEFAULT_HTTP_HOST = '127.0.0.1';

/**
 * Why this configuration must not start, or null. A dashboard (pages, API, actions) bound
 * beyond loopback without `SONAR_HTTP_TOKEN` would let anyone on the network cancel runs;
 * a bind to loopback is safe (DNS rebinding is refused by Host), and so is the probes-only
 * mode (`SONAR_DASHBOARD=off`), which serves only `/metrics`, `/healthz` and `/readyz`.
 */
export function httpExposureProblem(config: SonarConfig): ConfigProblem | null {
  if (config.httpPort === undefined || !config.dashboard || config.httpToken !== undefined) {
    return null;
  }
  const host = config.httpHost ?? DEFAULT_HTTP_HOST;
  if (isLoopback(host)) return null;
  return {
    variable: 'SONAR_HTTP_HOST',
    value: host,
    message: `${JSON.stringify(host)} is not a loopback address and SONAR_HTTP_TOKEN is unset: the dashboard would be open to the network (set SONAR_HTTP_TOKEN, or SONAR_DASHBOARD=off to serve only /metrics, /healthz and /readyz)`,
  };
}

/** Throws a {@link ConfigError} naming both settings when {@link httpExposureProblem} finds one. */
export function assertHttpExposure(config: SonarConfig): void {
  const problem = httpExposureProblem(config);
  if (problem !== null) throw new ConfigError([problem]);
}
