import { INVALID_SPAN_CONTEXT, SpanStatusCode, context, trace } from '@opentelemetry/api';
import type { Attributes, Context, Span, SpanKind } from '@opentelemetry/api';

/**
 * Sonar's tracer, from the global API only: a process that registered no tracer provider
 * gets the API's no-op one (nothing recorded, nothing exported), and a process embedding the
 * worker or client SDK with its own provider gets Sonar's spans in its own pipeline. A
 * proxy, so a provider registered after this module loaded is used too.
 */
export const tracer = trace.getTracer('sonar');

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
