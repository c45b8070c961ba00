import { writeSnapshot } from '../../src/backend/snapshots/snapshot.js';
import { silentLogger } from '../../src/log.js';
import type { TestBackend } from './test-backend.js';

/** Writes a snapshot of `w`'s projection now, as its snapshotter would. */
export const snapshotNow = (w: TestBackend) =>
  writeSnapshot({
    nc: w.ctx.nc,
    jsm: w.ctx.jsm,
    names: w.ctx.names,
    loop: w.ctx.loop,
    nodeId: 'test',
    log: silentLogger,
  });
