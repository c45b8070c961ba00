/**
 * Fixtures for the full sweep's tests: a backend on a fresh prefix with only the components a
 * test asks for, and a sweep run on that backend's context (optionally with a shifted clock:
 * a day or a month later, without waiting).
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { afterEach } from 'vitest';
import { ServerContact } from '../../src/backend/server-contact.js';
import type { BackendContext } from '../../src/backend/context.js';
import { FullSweep } from '../../src/backend/sweep/full-sweep.js';
import type { FullSweepOptions, SweepReport } from '../../src/backend/sweep/full-sweep.js';
import { silentLogger } from '../../src/log.js';
import { objOutputs } from './finalize-fixtures.js';
import type { ServerPerFile } from './server-per-file.js';
import { startBackend } from './test-backend.js';
import type { StartBackendOptions, TestBackend } from './test-backend.js';

export const DAY_MS = 24 * 3_600_000;

/**
 * A backend that runs `components` (none by default) and serves `handlers` (none by
 * default), its outputs in the test object store; another of an existing world with its
 * `prefix`.
 */
export const startSweepWorld = (
  nc: NatsConnection,
  url: string,
  opts: Omit<StartBackendOptions, 'url' | 'nc'> = {},
): Promise<TestBackend> =>
  startBackend({
    components: [],
    handlers: 'none',
    outputs: objOutputs,
    ...opts,
    url,
    nc,
    env: { SONAR_FINALIZE_LEASE: '1s', ...opts.env },
  });

/**
 * For a file with one server: starts a sweep world on it per call, and stops every one
 * started after each test.
 */
export function sweepWorldsPerTest(
  nats: ServerPerFile,
): (opts?: Omit<StartBackendOptions, 'url' | 'nc'>) => Promise<TestBackend> {
  const started: TestBackend[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((w) => w.stop()));
  });
  return async (opts) => {
    const w = await startSweepWorld(nats.nc, nats.server.url, opts);
    started.push(w);
    return w;
  };
}

/**
 * One full sweep on `w`'s context, its clock `shiftMs` ahead; `steady: false` sweeps as a
 * backend just back from an outage.
 */
export async function sweepNow(
  w: TestBackend,
  {
    shiftMs = 0,
    steady = true,
    ...sweepOpts
  }: FullSweepOptions & {
    shiftMs?: number;
    steady?: boolean;
  } = {},
): Promise<SweepReport> {
  const { ctx } = w;
  const shifted: BackendContext = {
    ...ctx,
    now: () => Date.now() + shiftMs,
    // As if in steady contact with the server for ever (the default), or just back from an
    // outage (`steady: false`).
    contact: new ServerContact(
      ctx.nc,
      ctx.jsm,
      silentLogger,
      undefined,
      steady ? -Infinity : undefined,
    ),
  };
  return (await FullSweep.open(shifted, sweepOpts)).run();
}
