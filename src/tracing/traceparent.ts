import { ROOT_CONTEXT, TraceFlags, isSpanContextValid, trace } from '@opentelemetry/api';
import type { Context, SpanContext } from '@opentelemetry/api';
import { TRACEPARENT_HEADER } from '../../streams/queues.js';

/** The W3C Trace Context header (https://www.w3.org/TR/trace-context/), as NATS headers carry it. */
export const TRACEPARENT = TRACEPARENT_HEADER;

/**
 * In a worker's `batch` request, the header `Sonar-Traceparent-<i>` is the `traceparent` of
 * its i-th request (from 0): one message, several traces.
 */
export const BATCH_TRACEPARENT_PREFIX = 'Sonar-Traceparent-';

const VERSION_00 = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
// A later version may append fields after the flags: its first four are read the same way.
const LATER_VERSION = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The span context a `traceparent` names, or null for anything that is not one (absent,
 * malformed, version `ff`, an all-zero id). Parsed here rather than through the global
 * propagator: the header is part of Sonar's wire contract, so it is read the same way
 * whatever propagators a process embedding the SDK configured.
 */
export function parseTraceparent(value: string | null | undefined): SpanContext | null {
  if (typeof value !== 'string' || value.length > 512) return null;
  const v = value.trim();
  let traceId: string, spanId: string, flags: string;
  const m0 = VERSION_00.exec(v);
  if (m0) {
    [, traceId = '', spanId = '', flags = ''] = m0;
  } else {
    const m = LATER_VERSION.exec(v);
    if (!m || m[1] === '00' || m[1] === 'ff') return null;
    [, , traceId = '', spanId = '', flags = ''] = m;
  }
  const sc: SpanContext = {
    traceId,
    spanId,
    traceFlags: parseInt(flags, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  return isSpanContextValid(sc) ? sc : null;
}

/** The `traceparent` of a span context, or undefined when it is not a valid one (a no-op span). */
export function formatTraceparent(sc: SpanContext | undefined): string | undefined {
  if (sc === undefined || !isSpanContextValid(sc)) return undefined;
  const flags = (sc.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, '0');
  return `00-${sc.traceId}-${sc.spanId}-${flags}`;
}

/** The `traceparent` of the span active in `ctx`, if any. */
export function traceparentOf(ctx: Context): string | undefined {
  return formatTraceparent(trace.getSpanContext(ctx));
}

/**
 * A context whose parent is the remote span a `traceparent` names; the root context when
 * there is none, so a span started in it begins a trace of its own (never the ambient one:
 * a request's trace is the caller's).
 */
export function contextFromTraceparent(value: string | null | undefined): Context {
  const sc = parseTraceparent(value);
  return sc === null ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, sc);
}
