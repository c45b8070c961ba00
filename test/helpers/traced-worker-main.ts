/**
 * A user's traced worker program: it registers its own OpenTelemetry tracer provider (OTLP
 * over HTTP to OTEL_EXPORTER_OTLP_ENDPOINT), as an application embedding the worker SDK
 * would, then runs `createWorker(...)`. Each task's handler makes a span of its own,
 * `user work`, which should nest under Sonar's attempt span. SIGTERM drains, flushes the
 * spans and exits.
 */
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { createWorker } from '../../src/index.js';

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'user-worker' }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter())],
});
provider.register();

const userTracer = trace.getTracer('user-app');
const worker = createWorker({
  tags: ['a'],
  slots: 2,
  connection: { natsUrl: process.env['SONAR_NATS_URL']! },
  prefix: process.env['SONAR_PREFIX']!,
  drainGraceMs: '5s',
  handler: (input: unknown) =>
    userTracer.startActiveSpan('user work', (span) => {
      span.setAttribute('user.input', JSON.stringify(input));
      span.end();
      return input;
    }),
});
process.stdout.write('worker starting\n');
await worker.run();
await provider.shutdown();
process.stdout.write(`worker ended ${worker.state}\n`);
