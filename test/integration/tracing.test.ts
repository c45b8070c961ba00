/**
 * OpenTelemetry across processes: a real `sonar backend` exporting with OTLP (turned on by
 * the standard variables only), a worker process that registered its own tracer provider (as
 * an application embedding the worker SDK would), and a client in this process with the
 * SDK's in-memory exporter. One run's spans must form a single trace from `submit` to the
 * sink write, with each parent in the process that sent the message, and a handler's own
 * span must be a child of its attempt's.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { trace } from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { spawnNode, spawnSonar } from '../helpers/sonar-process.js';
import type { SonarProcess } from '../helpers/sonar-process.js';
import { freshPrefix } from '../helpers/topology.js';
import { TEST_ENV } from '../helpers/worker-fixtures.js';

/** A span as this test reads it, from OTLP/JSON or from the in-memory exporter. */
interface SeenSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpBody {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        attributes?: OtlpAttribute[];
      }[];
    }[];
  }[];
}

const valueOf = (v: OtlpValue): unknown => v.stringValue ?? v.intValue;
const attrs = (list: OtlpAttribute[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** A local OTLP/HTTP receiver (JSON) on a random loopback port. */
function otlpReceiver(): Promise<{ server: Server; url: string; spans: SeenSpan[] }> {
  const spans: SeenSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpBody;
        for (const rs of body.resourceSpans ?? []) {
          const service = String(attrs(rs.resource?.attributes)['service.name']);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                service,
                name: s.name,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                attributes: attrs(s.attributes),
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({ server, url: `http://127.0.0.1:${port}`, spans });
    });
  });
}

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const nats = serverPerFile();
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
const memory = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
const started: SonarProcess[] = [];

beforeAll(async () => {
  receiver = await otlpReceiver();
  provider.register();
});

afterAll(async () => {
  await Promise.all(started.map((p) => (p.running ? p.kill('SIGKILL') : p.exited)));
  await provider.shutdown();
  trace.disable();
  await new Promise((resolve) => receiver.server.close(resolve));
});

/** The spans this process recorded (the client's), in the shape the receiver gives. */
const clientSpans = (): SeenSpan[] =>
  memory.getFinishedSpans().map((s) => ({
    service: 'client',
    name: s.name,
    traceId: s.spanContext().traceId,
    spanId: s.spanContext().spanId,
    parentSpanId: s.parentSpanContext?.spanId,
    attributes: { ...s.attributes },
  }));

describe('tracing', () => {
  it("one run's spans form one trace across the client, backend and worker processes", async () => {
    const prefix = freshPrefix();
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    const backend = spawnSonar('traced backend', ['backend'], {
      ...TEST_ENV,
      SONAR_NATS_URL: nats.server.url,
      SONAR_PREFIX: prefix,
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_SERVICE_NAME: 'sonar-backend',
      ...otel,
    });
    started.push(backend);
    await eventually(() => backend.stderr().includes('backend started') || !backend.running, {
      timeoutMs: 30_000,
    });
    expect(backend.running, backend.stderr()).toBe(true);
    const worker = spawnNode(
      'traced worker',
      ['--import', 'tsx', 'test/helpers/traced-worker-main.ts'],
      {
        ...TEST_ENV,
        SONAR_NATS_URL: nats.server.url,
        SONAR_PREFIX: prefix,
        ...otel,
      },
    );
    started.push(worker);

    const client = new SonarClient(nats.nc, { prefix });
    await client.submit({
      runId: 'traced',
      steps: [
        {
          id: 's',
          tags: ['a'],
          output: 'json',
          tasks: [
            { id: 't0', input: { n: 0 } },
            { id: 't1', input: { n: 1 } },
          ],
        },
      ],
    });
    const status = await client.wait('traced', { timeoutMs: 30_000 });
    expect(status.state).toBe('Succeeded');

    // Both finalizations' sink writes exported; the worker's spans are sent as each ends.
    await eventually(
      () =>
        receiver.spans.filter((s) => s.name === 'sink write').length === 2 &&
        receiver.spans.filter((s) => s.name === 'user work').length === 2,
      { timeoutMs: 15_000, message: 'spans exported' },
    );
    const [submit] = clientSpans().filter((s) => s.name === 'submit');
    expect(submit).toBeDefined();
    const traceOf = (s: SeenSpan) => s.traceId;
    const all = [...clientSpans(), ...receiver.spans].filter((s) => traceOf(s) === submit!.traceId);
    const byId = new Map(all.map((s) => [s.spanId, s]));
    const named = (name: string) => all.filter((s) => s.name === name);
    const parentOf = (s: SeenSpan) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);

    // Every span of the run, in every process, is in the submit's trace.
    const runSpans = [...clientSpans(), ...receiver.spans].filter(
      (s) =>
        s.attributes['sonar.run_id'] === 'traced' || ['sink write', 'user work'].includes(s.name),
    );
    expect(new Set(runSpans.map(traceOf))).toEqual(new Set([submit!.traceId]));
    expect(new Set(all.map((s) => s.service))).toEqual(
      new Set(['client', 'sonar-backend', 'user-worker']),
    );

    // submit (client) → api submit.* (backend).
    const commit = named('api submit.commit');
    expect(commit).toHaveLength(1);
    expect(parentOf(commit[0]!)?.spanId).toBe(submit!.spanId);
    expect(parentOf(named('api submit.begin')[0]!)?.spanId).toBe(submit!.spanId);

    // The commit's context is the run's: each dispatch (backend) is its child.
    const dispatches = named('dispatch');
    expect(dispatches).toHaveLength(2);
    for (const d of dispatches) {
      expect(parentOf(d)?.spanId).toBe(commit[0]!.spanId);
      expect(d.service).toBe('sonar-backend');
    }

    // dispatch → attempt (worker) → user work (the handler's own span) and the backend's
    // handling of the attempt's start and result.
    const attempts = named('attempt');
    expect(attempts).toHaveLength(2);
    for (const a of attempts) {
      expect(a.service).toBe('user-worker');
      const d = parentOf(a)!;
      expect(d.name).toBe('dispatch');
      expect(d.attributes['sonar.attempt_id']).toBe(a.attributes['sonar.attempt_id']);
      const children = all.filter((s) => s.parentSpanId === a.spanId);
      expect(children.map((s) => s.name).sort()).toEqual(['api result', 'api start', 'user work']);
      const work = children.find((s) => s.name === 'user work')!;
      expect(work.service).toBe('user-worker');

      // result (backend) → finalize (backend, from the job's header) → sink write.
      const result = children.find((s) => s.name === 'api result')!;
      expect(result.service).toBe('sonar-backend');
      const finalize = all.filter((s) => s.name === 'finalize' && s.parentSpanId === result.spanId);
      expect(finalize).toHaveLength(1);
      const sink = all.filter(
        (s) => s.name === 'sink write' && s.parentSpanId === finalize[0]!.spanId,
      );
      expect(sink).toHaveLength(1);
      expect(sink[0]!.attributes['sonar.task_id']).toBe(a.attributes['sonar.task_id']);
    }

    // `sonar worker`, traced by OTEL_TRACES_EXPORTER: its command gets the attempt's
    // traceparent as TRACEPARENT.
    const cli = spawnSonar(
      'traced cli worker',
      [
        'worker',
        '--tags',
        'b',
        '--no-spot',
        '--',
        'sh',
        '-c',
        'cat >/dev/null; printf %s "$TRACEPARENT"',
      ],
      {
        ...TEST_ENV,
        SONAR_NATS_URL: nats.server.url,
        SONAR_PREFIX: prefix,
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_SERVICE_NAME: 'sonar-worker',
        ...otel,
      },
    );
    started.push(cli);
    await client.submit({ runId: 'cmd', steps: [{ id: 's', tags: ['b'], tasks: [{ id: 't' }] }] });
    expect((await client.wait('cmd', { timeoutMs: 30_000 })).state).toBe('Succeeded');
    const env = new TextDecoder().decode((await client.output('cmd', 't')) as Uint8Array);
    await cli.kill('SIGTERM');
    const cmdAttempt = await eventually(
      () =>
        receiver.spans.find(
          (s) => s.name === 'attempt' && s.attributes['sonar.run_id'] === 'cmd',
        ) ?? false,
      { timeoutMs: 15_000, message: 'the cli worker exported its attempt span' },
    );
    expect(cmdAttempt.service).toBe('sonar-worker');
    expect(env).toBe(`00-${cmdAttempt.traceId}-${cmdAttempt.spanId}-01`);

    await worker.kill('SIGTERM');
    await backend.kill('SIGTERM');
  });

  /** What a `sonar` process loaded of OpenTelemetry, written to stderr as it exits. */
  const LOADED_HOOK =
    'data:text/javascript,import{createRequire}from"node:module";const r=createRequire(process.cwd()+"/");' +
    'process.on("exit",()=>process.stderr.write("LOADED "+JSON.stringify(Object.keys(r.cache).filter((k)=>k.includes("@opentelemetry")))+"\\n"))';
  const loadedBy = async (env: Record<string, string>): Promise<string[]> => {
    const p = spawnNode('help', ['--import', LOADED_HOOK, 'bin/sonar.js', '--help'], env);
    started.push(p);
    const exit = await p.exited;
    expect(exit.code, p.stderr()).toBe(0);
    const line = /^LOADED (.*)$/m.exec(p.stderr());
    expect(line, p.stderr()).not.toBeNull();
    return JSON.parse(line![1]!) as string[];
  };

  it('with tracing off, a sonar process loads no OpenTelemetry SDK module', async () => {
    const sdk = (files: string[]) =>
      files.filter((f) => /@opentelemetry[\\/](sdk-|exporter-|resources)/.test(f));
    // The hook sees the SDK when it is loaded: with an exporter asked for, it is.
    expect(sdk(await loadedBy({ OTEL_TRACES_EXPORTER: 'console' }))).not.toEqual([]);
    expect(sdk(await loadedBy({ OTEL_TRACES_EXPORTER: '' }))).toEqual([]);
    expect(sdk(await loadedBy({ OTEL_TRACES_EXPORTER: 'none' }))).toEqual([]);
    expect(
      sdk(await loadedBy({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' })),
    ).toEqual([]);
  });

  it('with no tracer provider, Sonar records nothing and passes a trace context on', async () => {
    // In a process of its own: this one registered a provider for the test above.
    const code = [
      "const { inSpan, tracer } = await import('./src/tracing/tracer.js');",
      "const { contextFromTraceparent, traceparentOf } = await import('./src/tracing/traceparent.js');",
      `const tp = '${TP}';`,
      'const out = {',
      "  recording: tracer.startSpan('x').isRecording(),",
      "  passed: await inSpan('y', { kind: 0, parent: contextFromTraceparent(tp) }, (s, ctx) =>",
      '    Promise.resolve([s.isRecording(), traceparentOf(ctx)])),',
      "  rooted: await inSpan('z', { kind: 0, parent: contextFromTraceparent(undefined) }, (_s, ctx) =>",
      '    Promise.resolve(traceparentOf(ctx) ?? null)),',
      '};',
      'process.stdout.write(JSON.stringify(out));',
    ].join('\n');
    const p = spawnNode('noop', ['--import', 'tsx', '--input-type=module', '-e', code], {});
    started.push(p);
    expect((await p.exited).code, p.stderr()).toBe(0);
    expect(JSON.parse(p.stdout())).toEqual({ recording: false, passed: [false, TP], rooted: null });
  });
});
