import { describe, expect, it } from 'vitest';
import { applyEvent, createProjection } from '../../actors/projection.js';
import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import type { ContextManager, Tracer, TracerProvider } from '@opentelemetry/api';
import {
  contextFromTraceparent,
  formatTraceparent,
  parseTraceparent,
  traceparentOf,
} from '../../src/tracing/traceparent.js';
import { inSpan, passedOn, tracingInUse } from '../../src/tracing/tracer.js';
import { tracesExportersOf } from '../../src/tracing/sdk.js';

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('traceparent', () => {
  it('reads a version 00 header and writes it back the same', () => {
    const sc = parseTraceparent(TP);
    expect(sc).toEqual({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: 1,
      isRemote: true,
    });
    expect(formatTraceparent(sc!)).toBe(TP);
  });

  it('reads the first four fields of a later version, and keeps only the sampled flag', () => {
    const sc = parseTraceparent('cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03-what');
    expect(sc?.traceFlags).toBe(1);
    expect(formatTraceparent(sc!)).toBe(TP);
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['version ff', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
    ['version 00 with more fields', `${TP}-x`],
    ['an all-zero trace id', '00-00000000000000000000000000000000-b7ad6b7169203331-01'],
    ['an all-zero span id', '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01'],
    ['upper case', TP.toUpperCase()],
    ['short', '00-0af7651916cd43dd-b7ad6b7169203331-01'],
  ])('refuses %s', (_what, value) => {
    expect(parseTraceparent(value)).toBeNull();
  });
});

describe('tracing not in use', () => {
  it.each([
    ['absent', undefined],
    ['null', null],
    ['empty', ''],
    ['version 00', TP],
    ['a later version with flags 03 and more fields', `cc-${TP.slice(3, -3)}-03-what`],
    ['padded', `  ${TP} `],
    ['unsampled', `${TP.slice(0, -2)}00`],
    ['version ff', `ff-${TP.slice(3)}`],
    ['upper case', TP.toUpperCase()],
    ['an all-zero trace id', '00-00000000000000000000000000000000-b7ad6b7169203331-01'],
  ])('passedOn(%s) is what a no-op span started under it passes on', async (_what, value) => {
    const viaSpan = await inSpan(
      'x',
      { kind: 0, parent: contextFromTraceparent(value) },
      (_s, ctx) => Promise.resolve(traceparentOf(ctx)),
    );
    expect(passedOn(value)).toBe(viaSpan);
  });

  it('is so with no tracer provider and no context manager; either one puts it in use', () => {
    expect(tracingInUse()).toBe(false);
    const noopTracer = trace.getTracer('t');
    const provider: TracerProvider = { getTracer: (): Tracer => noopTracer };
    expect(trace.setGlobalTracerProvider(provider)).toBe(true);
    try {
      expect(tracingInUse()).toBe(true);
    } finally {
      trace.disable();
    }
    expect(tracingInUse()).toBe(false);
    let active = ROOT_CONTEXT;
    const manager: ContextManager = {
      active: () => active,
      with: (ctx, fn, thisArg, ...args) => {
        const before = active;
        active = ctx;
        try {
          return fn.call(thisArg, ...args);
        } finally {
          active = before;
        }
      },
      bind: (_ctx, target) => target,
      enable: () => manager,
      disable: () => manager,
    };
    expect(context.setGlobalContextManager(manager)).toBe(true);
    try {
      expect(tracingInUse()).toBe(true);
    } finally {
      context.disable();
    }
    expect(tracingInUse()).toBe(false);
  });
});

describe('tracesExportersOf', () => {
  const env = (tracesExporter?: string, sdkDisabled?: string) => ({ tracesExporter, sdkDisabled });

  it('is off unless OTEL_TRACES_EXPORTER names an exporter', () => {
    expect(tracesExportersOf(env())).toEqual([]);
    expect(tracesExportersOf(env(''))).toEqual([]);
    expect(tracesExportersOf(env('none'))).toEqual([]);
    expect(tracesExportersOf(env('otlp,none'))).toEqual([]);
  });

  it('names each exporter once; OTEL_SDK_DISABLED=true wins', () => {
    expect(tracesExportersOf(env('otlp'))).toEqual(['otlp']);
    expect(tracesExportersOf(env(' OTLP , console,otlp'))).toEqual(['otlp', 'console']);
    expect(tracesExportersOf(env('otlp', 'true'))).toEqual([]);
    expect(tracesExportersOf(env('otlp', 'false'))).toEqual(['otlp']);
  });

  it('refuses an exporter it cannot start, naming the variable', () => {
    expect(() => tracesExportersOf(env('zipkin'))).toThrow(
      /^OTEL_TRACES_EXPORTER: "zipkin" is not an exporter sonar starts \(otlp, console, none\)$/,
    );
  });
});

describe('RunSubmitted.traceparent', () => {
  const submitted = (data: Record<string, unknown>) => ({
    seq: 1,
    subject: 'sonar.events.run.r1',
    time: '2026-01-01T00:00:00.000Z',
    type: 'RunSubmitted',
    data: { runId: 'r1', stepIds: [], taskCount: 0, ...data },
  });

  it('is kept in the run context when present, and absent otherwise', () => {
    const p = createProjection();
    applyEvent(p, submitted({ traceparent: TP }));
    expect(p.runs.get('r1')?.snapshot.context.traceparent).toBe(TP);
    const q = createProjection();
    applyEvent(q, submitted({}));
    expect(q.runs.get('r1')?.snapshot.context).not.toHaveProperty('traceparent');
  });

  it('is dropped, never a reason to skip the event, when it is not a short string', () => {
    const p = createProjection();
    applyEvent(p, submitted({ traceparent: 42 }));
    expect(p.runs.get('r1')?.snapshot.value).toBe('Running');
    expect(p.runs.get('r1')?.snapshot.context).not.toHaveProperty('traceparent');
  });
});
