import {
  INVALID_SPAN_CONTEXT,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanStatusCode,
  context,
  createContextKey,
  trace,
} from '@opentelemetry/api';
import type { Attributes, Context, Span, SpanKind } from '@opentelemetry/api';
import { formatTraceparent, parseTraceparent } from './traceparent.js';

/**
 * Sonar's tracer, from the global API only: a process that registered no tracer provider
 * gets the API's no-op one (nothing recorded, nothing exported), and a process embedding the
 * worker or client SDK with its own provider gets Sonar's spans in its own pipeline. A
 * proxy, so a provider registered after this module loaded is used too.
 */
export const tracer = trace.getTracer('sonar');

/** The API's own no-op provider: what its proxy delegates to while nobody registered one. */
const NOOP_TRACER_PROVIDER = new ProxyTracerProvider().getDelegate();
const PROBE = ROOT_CONTEXT.setValue(createContextKey('sonar tracing probe'), true);

/**
 * Whether spans this process starts could be recorded (a tracer provider is registered) or
 * the context they are active in could be seen (a context manager is registered). When
 * neither is, {@link inSpan} has one effect only: its no-op span passes the parent's trace
 * context on ({@link passedOn}). A component asks once, when it starts, and then skips the
 * span, the context and the attributes of each request, which the no-op path still builds.
 */
export function tracingInUse(): boolean {
  const provider = trace.getTracerProvider();
  const registered =
    !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NOOP_TRACER_PROVIDER;
  return registered || context.with(PROBE, () => context.active() === PROBE);
}

/**
 * The `traceparent` a span started under `parent` (a `traceparent` value) would pass on when
 * tracing is not in use: the API's no-op span carries its parent's span context, so it is the
 * parent's own, as {@link formatTraceparent} writes it; undefined when it names no span.
 */
export function passedOn(parent: string | null | undefined): string | undefined {
  if (parent === undefined || parent === null) return undefined;
  return formatTraceparent(parseTraceparent(parent) ?? undefined);
}

/** What {@link inSpan} starts. */
export interface SpanOptions {
  kind: SpanKind;
  attributes?: Attributes;
  /** The parent: a remote span (contextFromTraceparent), or the active context. */
  parent?: Context;
  /** Start no span when the parent is not in a trace (a step of a job nobody traced). */
  onlyInTrace?: boolean;
}

/**
 * Runs `fn` in a new span, made the active one for `fn` (where a context manager is
 * registered), and ends the span when `fn` settles: an error is recorded on it and thrown
 * on. Every Sonar span ends in the process that started it.
 */
export async function inSpan<T>(
  name: string,
  opts: SpanOptions,
  fn: (span: Span, ctx: Context) => Promise<T>,
): Promise<T> {
  const parent = opts.parent ?? context.active();
  if (opts.onlyInTrace === true && trace.getSpanContext(parent) === undefined) {
    return fn(trace.wrapSpanContext(INVALID_SPAN_CONTEXT), parent);
  }
  const span = tracer.startSpan(
    name,
    { kind: opts.kind, ...(opts.attributes && { attributes: opts.attributes }) },
    parent,
  );
  const ctx = trace.setSpan(parent, span);
  try {
    return await context.with(ctx, () => fn(span, ctx));
  } catch (err: unknown) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** Records a failure on a span: the exception event and an error status. */
export function failSpan(span: Span, err: unknown): void {
  if (!span.isRecording()) return;
  if (err instanceof Error) span.recordException(err);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: err instanceof Error ? err.message : String(err),
  });
}
