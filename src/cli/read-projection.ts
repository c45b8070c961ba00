import type { JetStreamManager } from '@nats-io/jetstream';
import { applyEvent, createProjection } from '../../actors/projection.js';
import type { Projection } from '../../actors/projection.js';
import { EventStore } from '../../streams/event-store.js';
import { isSnapshotLossError, loadSnapshot } from '../backend/snapshots/index.js';
import type { LoadedSnapshot } from '../backend/snapshots/index.js';
import { silentLogger } from '../log.js';
import type { CliContext } from './context.js';

/** What reading the projection needs of a CLI connection. */
export type ReadContext = Pick<CliContext, 'nc' | 'names'>;

/**
 * The stored projection snapshot when a backend's start would use it (snapshot.ts), else null.
 * Quietly null while the stream is whole: folding it all is then exact. When retention purged
 * events and the snapshot cannot be used, the runs purged but not yet expired exist nowhere
 * else; a backend refuses to start then, a reader shows what is left and says so on stderr.
 */
export async function readSnapshot(
  ctx: ReadContext,
  jsm: JetStreamManager,
): Promise<LoadedSnapshot | null> {
  try {
    return await loadSnapshot({ nc: ctx.nc, jsm, names: ctx.names, log: silentLogger });
  } catch (err: unknown) {
    if (!isSnapshotLossError(err)) {
      // A credential made before readers could read the snapshot (or a store being rewritten):
      // the stream alone still gives every run it holds.
      process.stderr.write(
        `sonar: warning: could not read the projection snapshot (${err instanceof Error ? err.message : String(err)}): ` +
          'folding the event stream alone, so runs whose events retention purged are missing; ' +
          'a credential made by an older `sonar creds init` lacks this read\n',
      );
      return null;
    }
    process.stderr.write(
      `sonar: warning: the projection snapshot is unusable (${err.why}) while ` +
        `${err.purged.count} events were purged from ${ctx.names.streams.events} by retention: ` +
        'runs purged but not yet expired are missing from what follows\n',
    );
    return null;
  }
}

/**
 * The projection as a backend starting now would fold it: the stored snapshot, then the
 * events after its sequence; the whole stream when there is no usable snapshot. Runs whose
 * events retention purged live only in the snapshot until their `RunExpired`, so a fold of
 * the stream alone would not show them.
 */
export async function readProjection(ctx: ReadContext): Promise<Projection> {
  const store = new EventStore(ctx.nc, ctx.names);
  const from = await readSnapshot(ctx, await store.jsm());
  const p = from?.projection ?? createProjection();
  await store.replay(
    (r) => {
      applyEvent(p, r);
    },
    { fromSeq: (from?.header.seq ?? 0) + 1 },
  );
  return p;
}
