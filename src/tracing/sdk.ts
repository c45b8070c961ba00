// Types only, erased from the build: the modules themselves are imported on demand below.
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkTraceNode from '@opentelemetry/sdk-trace-node';
import { ValidationError } from '../../actors/errors.js';
import type { Logger } from '../log.js';

/** The standard variables that decide whether a Sonar process starts the tracing SDK. */
export interface TracingEnvironment {
  /** `OTEL_TRACES_EXPORTER`: `otlp`, `console`, or a comma-separated list of them; `none`. */
  tracesExporter: string | undefined;
  /** `OTEL_SDK_DISABLED`: `true` turns tracing off whatever else is set. */
  sdkDisabled: string | undefined;
}

/** The exporters a Sonar process can start (`OTEL_TRACES_EXPORTER`). */
export const TRACE_EXPORTERS = ['otlp', 'console'] as const;
type TraceExporter = (typeof TRACE_EXPORTERS)[number];

/**
 * The exporters asked for, or none: tracing is off. Off unless `OTEL_TRACES_EXPORTER` names
 * one, because the specification's default for that variable is `otlp`, and a process that
 * started exporting to localhost:4318 because nothing was configured would not be off by
 * default. `none` anywhere in the list, or `OTEL_SDK_DISABLED=true`, turns it off.
 *
 * @throws Error naming the variable and the value it does not know.
 */
export function tracesExportersOf(env: TracingEnvironment): TraceExporter[] {
  if (env.sdkDisabled?.trim().toLowerCase() === 'true') return [];
  const names = (env.tracesExporter ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
  if (names.includes('none')) return [];
  for (const name of names) {
    if (!(TRACE_EXPORTERS as readonly string[]).includes(name)) {
      throw new ValidationError(
        `OTEL_TRACES_EXPORTER: ${JSON.stringify(name)} is not an exporter sonar starts (${[...TRACE_EXPORTERS, 'none'].join(', ')})`,
      );
    }
  }
  return [...new Set(names)] as TraceExporter[];
}

/** A started tracing SDK. */
export interface Tracing {
  /** Exports what is buffered and stops; spans started afterwards are dropped. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK for a `sonar` process when `OTEL_TRACES_EXPORTER` asks for it
 * (see {@link tracesExportersOf}), and returns null without loading anything when it does not:
 * the SDK's modules are imported here only, on demand, so the default path pays nothing.
 *
 * The SDK reads the other standard variables itself: `OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._HEADERS` and `..._TIMEOUT` (OTLP over HTTP with
 * JSON), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and its
 * argument, `OTEL_BSP_*`. The SDK packages are optional peer dependencies: a process asked to
 * trace without them installed says so once and runs untraced.
 *
 * @param role - the process (`backend`, `worker`, `submit`...): the resource's `sonar.process`.
 */
export async function startTracing(
  env: TracingEnvironment,
  role: string,
  log: Logger,
): Promise<Tracing | null> {
  const exporters = tracesExportersOf(env);
  if (exporters.length === 0) return null;
  let sdk: typeof SdkTraceNode;
  let resources: typeof Resources;
  try {
    [sdk, resources] = await Promise.all([
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/resources'),
    ]);
  } catch (err: unknown) {
    log.warn(
      'tracing not started: install @opentelemetry/sdk-trace-node, @opentelemetry/resources and @opentelemetry/exporter-trace-otlp-http',
      { err },
    );
    return null;
  }
  const spanProcessors = [];
  for (const name of exporters) {
    if (name === 'console') {
      spanProcessors.push(new sdk.SimpleSpanProcessor(new sdk.ConsoleSpanExporter()));
      continue;
    }
    let otlp: typeof OtlpHttp;
    try {
      otlp = await import('@opentelemetry/exporter-trace-otlp-http');
    } catch (err: unknown) {
      log.warn('otlp traces not exported: install @opentelemetry/exporter-trace-otlp-http', {
        err,
      });
      continue;
    }
    spanProcessors.push(new sdk.BatchSpanProcessor(new otlp.OTLPTraceExporter()));
  }
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': 'sonar', 'sonar.process': role }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.NodeTracerProvider({ resource, spanProcessors });
  // Global tracer provider, AsyncLocalStorage context manager and W3C propagator.
  provider.register();
  log.debug('tracing started', { exporters });
  return {
    shutdown: () =>
      provider.shutdown().catch((err: unknown) => log.warn('tracing shutdown failed', { err })),
  };
}
