import type { BackendContext } from '../context.js';
import { snapshotFingerprint, storedSnapshot, writeSnapshot } from '../snapshots/index.js';
import type { RetentionSnapshots } from './retention.js';

/**
 * Retention's hold on `sonar_snapshots` (snapshot.ts): snapshot this backend's projection
 * now unless the stored one already covers the sequence. writeSnapshot returns null when the
 * stored one is as new or another backend wrote meanwhile; the stored one is read back then,
 * and counts only when it has this build's fingerprint. A snapshot of another fingerprint is
 * loaded too once events were purged (loadSnapshot), but only as a way out after an upgrade:
 * purging on its strength would make every later start take the whole prefix up to its
 * sequence from another build's fold instead of an exact one. With a stored snapshot of
 * another build (an older backend of a rolling upgrade wrote last), this resolves to 0 and
 * retention purges nothing this pass.
 */
export function snapshotRetention(ctx: BackendContext): RetentionSnapshots {
  const deps = {
    nc: ctx.nc,
    jsm: ctx.jsm,
    names: ctx.names,
    loop: ctx.loop,
    nodeId: ctx.nodeId,
    log: ctx.log.child({ component: 'snapshot' }),
  };
  return {
    async ensureCovers(seq: number): Promise<number> {
      await ctx.loop.waitFor(seq);
      const written = await writeSnapshot(deps);
      if (written) return written.seq;
      const stored = await storedSnapshot(deps);
      return stored?.fingerprint === snapshotFingerprint() ? stored.seq : 0;
    },
  };
}
