/**
 * The one way tests start a backend: `Backend.start` with the parts `sonar backend` runs
 * (src/default-parts.ts), of which a test swaps out only what it must (which components run,
 * the API it serves, its output store), on a fresh prefix unless told otherwise.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { SonarEvent } from '../../actors/events.js';
import { Backend } from '../../src/backend/backend.js';
import type { BackendParts, Component } from '../../src/backend/backend.js';
import type { BackendContext } from '../../src/backend/context.js';
import type { Command } from '../../src/backend/projection/event-writer.js';
import { loadConfig } from '../../src/config.js';
import type { SonarConfig } from '../../src/config.js';
import { defaultParts } from '../../src/default-parts.js';
import { HttpComponent } from '../../src/http/http-component.js';
import { silentLogger } from '../../src/log.js';
import type { Logger } from '../../src/log.js';
import type { OutputStore } from '../../src/storage/output-store.js';
import { freshPrefix } from './topology.js';

export interface StartBackendOptions {
  /** The server's URL (SONAR_NATS_URL); without it, whatever `env` says. */
  url?: string;
  /**
   * A connection to share (the backend leaves it open); without it the backend connects,
   * and reconnects, on its own as `sonar backend` does.
   */
  nc?: NatsConnection;
  /** The topology's prefix: a fresh one by default. SONAR_PREFIX in `env` wins. */
  prefix?: string;
  /** SONAR_* settings on top of the URL and prefix. */
  env?: Readonly<Record<string, string | undefined>>;
  /** The components, in start order. Default: every one `sonar backend` runs. */
  components?: BackendParts['components'];
  /** The API it serves. Default: the production handlers; `none`: no verb at all. */
  handlers?: BackendParts['handlers'] | 'none';
  /**
   * Where task outputs live. Default: the configured store, as in production; an OutputStore
   * to use that one; `none` for a backend that never touches outputs.
   */
  outputs?: BackendParts['outputs'] | OutputStore | 'none';
  nodeId?: string;
  /** Default: silent. */
  log?: Logger;
  stopTimeoutMs?: number;
}

export interface TestBackend {
  backend: Backend;
  ctx: BackendContext;
  config: SonarConfig;
  /** The settings it was started with: what a worker process or another backend needs. */
  env: Record<string, string>;
  /** `http://127.0.0.1:<port>` of its HTTP component; throws when it runs none. */
  readonly url: string;
  /** Its running component of class `kind`; throws when it runs none. */
  component<T extends Component>(kind: abstract new (...args: never[]) => T): T;
  /** Writes one event through the backend's EventWriter (judged by the machine): its seq. */
  write(subject: string, type: Command['type'], data: unknown): Promise<number>;
  /** {@link TestBackend.write} for an event made by the event builders. */
  append(subject: string, event: SonarEvent): Promise<number>;
  stop(): Promise<void>;
}

const NO_OUTPUTS: BackendParts['outputs'] = () => Promise.resolve({} as OutputStore);

function outputsPart(outputs: StartBackendOptions['outputs']): BackendParts['outputs'] {
  if (outputs === undefined) return defaultParts.outputs;
  if (outputs === 'none') return NO_OUTPUTS;
  if (typeof outputs === 'function') return outputs;
  return () => Promise.resolve(outputs);
}

export async function startBackend(opts: StartBackendOptions = {}): Promise<TestBackend> {
  const env: Record<string, string> = {};
  const given = {
    ...(opts.url !== undefined && { SONAR_NATS_URL: opts.url }),
    SONAR_PREFIX: opts.prefix ?? freshPrefix(),
    ...opts.env,
  };
  for (const [k, v] of Object.entries(given)) if (v !== undefined) env[k] = v;
  const config = loadConfig(env);
  // Each component as it is made, so a test can reach the one it drives.
  const made: Component[] = [];
  const components = (opts.components ?? defaultParts.components).map(
    (make) => (ctx: BackendContext) => {
      const c = make(ctx);
      made.push(c);
      return c;
    },
  );
  const handlers = opts.handlers ?? defaultParts.handlers;
  const backend = await Backend.start({
    config,
    log: opts.log ?? silentLogger,
    ...(opts.nc && { nc: opts.nc }),
    ...(opts.nodeId !== undefined && { nodeId: opts.nodeId }),
    ...(opts.stopTimeoutMs !== undefined && { stopTimeoutMs: opts.stopTimeoutMs }),
    parts: {
      handlers: handlers === 'none' ? () => ({}) : handlers,
      components,
      outputs: outputsPart(opts.outputs),
    },
  });
  const ctx = backend.ctx;
  const component = <T extends Component>(kind: abstract new (...args: never[]) => T): T => {
    const found = made.find((c): c is T => c instanceof kind);
    if (!found) throw new Error(`this backend runs no ${kind.name}`);
    return found;
  };
  const write = async (subject: string, type: Command['type'], data: unknown) =>
    (await ctx.writer.write({ subject, type, data })).seq;
  return {
    backend,
    ctx,
    config,
    env,
    get url() {
      return component(HttpComponent).server.url;
    },
    component,
    write,
    append: (subject, event) => write(subject, event.type, event.data),
    stop: () => backend.stop(),
  };
}
