/**
 * Fixtures for the full sweep's tests: a real Backend on a fresh prefix with only
 * the components a test asks for, a sweep run on that backend's context (optionally with a
 * shifted clock: a day or a month later, without waiting), and events written by hand.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { ServerContact } from '../../src/backend/server-contact.js';
import { Backend } from '../../src/backend/backend.js';
import type { Component } from '../../src/backend/backend.js';
import type { BackendContext } from '../../src/backend/context.js';
import type { Handlers } from '../../src/backend/api/index.js';
import type { Command } from '../../src/backend/projection/event-writer.js';
import { FullSweep } from '../../src/backend/sweep/full-sweep.js';
import type { FullSweepOptions, SweepReport } from '../../src/backend/sweep/full-sweep.js';
import { silentLogger } from '../../src/log.js';
import { ObjOutputStore, testConfig } from './finalize-fixtures.js';
import { freshPrefix } from './topology.js';
import { names } from '../../streams/names.js';

export interface SweepWorld {
  backend: Backend;
  ctx: BackendContext;
  /** Writes one event through the backend's EventWriter (judged by the machine). */
  write(subject: string, type: Command['type'], data: unknown): Promise<number>;
  /**
   * One full sweep on this backend's context, its clock `shiftMs` ahead; `steady: false`
   * sweeps as a backend just back from an outage.
   */
  sweep(opts?: FullSweepOptions & { shiftMs?: number; steady?: boolean }): Promise<SweepReport>;
  stop(): Promise<void>;
}

export async function startSweepWorld(
  nc: NatsConnection,
  url: string,
  opts: {
    env?: Record<string, string>;
    components?: ((ctx: BackendContext) => Component)[];
    nodeId?: string;
    /** Another backend of an existing world: its prefix. */
    prefix?: string;
    /** The API it serves (none by default). */
    handlers?: (ctx: BackendContext) => Handlers;
  } = {},
): Promise<SweepWorld> {
  const n = names(opts.prefix ?? freshPrefix());
  const backend = await Backend.start({
    config: testConfig(url, n, { SONAR_FINALIZE_LEASE: '1s', ...opts.env }),
    nc,
    log: silentLogger,
    ...(opts.nodeId !== undefined && { nodeId: opts.nodeId }),
    parts: {
      handlers: opts.handlers ?? (() => ({})),
      components: opts.components ?? [],
      outputs: async (c) => ObjOutputStore.open(c, n),
    },
  });
  const ctx = backend.ctx;
  return {
    backend,
    ctx,
    write: async (subject, type, data) => (await ctx.writer.write({ subject, type, data })).seq,
    sweep: async ({ shiftMs = 0, steady = true, ...sweepOpts } = {}) => {
      const shifted: BackendContext = {
        ...ctx,
        now: () => Date.now() + shiftMs,
        // As if in steady contact with the server for ever (the default), or just back
        // from an outage (`steady: false`).
        contact: new ServerContact(
          nc,
          ctx.jsm,
          silentLogger,
          undefined,
          steady ? -Infinity : undefined,
        ),
      };
      return (await FullSweep.open(shifted, sweepOpts)).run();
    },
    stop: () => backend.stop(),
  };
}

export const DAY_MS = 24 * 3_600_000;
