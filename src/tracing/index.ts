export {
  TRACEPARENT,
  contextFromTraceparent,
  formatTraceparent,
  parseTraceparent,
  traceparentOf,
} from './traceparent.js';
export { failSpan, inSpan, passedOn, tracer, tracingInUse } from './tracer.js';
export type { SpanOptions } from './tracer.js';
export { startTracing, tracesExportersOf, TRACE_EXPORTERS } from './sdk.js';
export type { Tracing, TracingEnvironment } from './sdk.js';
