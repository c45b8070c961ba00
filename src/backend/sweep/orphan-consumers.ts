import type { ConsumerInfo } from '@nats-io/jetstream';
import { isId } from '../../../actors/ids.js';
import type { LiveWorker } from '../../../actors/reconciler/fleet.js';
import type { BackendContext } from '../context.js';
import { lastAdvertised } from './last-advertised.js';

/** A `dispatch_<tag>` consumer no live worker has advertised for this long is deleted. */
export const ORPHAN_CONSUMER_AGE_MS = 24 * 3_600_000;

/** What the orphan-consumer repair found and did. */
export interface OrphanConsumersReport {
  /** `dispatch_<tag>` consumers looked at. */
  checked: number;
  /** Names of the consumers deleted. */
  deleted: string[];
}

/**
 * Deletes the `dispatch_<tag>` consumers of tags that no live worker has advertised for a day
 * (DESIGN.md section 2): each costs the server state and a consumer that nobody pulls. `join`
 * recreates a tag's consumer before it answers, and the reconciler before it publishes, and a
 * work-queue message published meanwhile waits in the stream for it (deliver all).
 *
 * Kept: a consumer created less than a day ago, one whose tag a worker advertised within the
 * day (registry or projection), and one holding a message a worker has not acked yet. The
 * registry is read again just before each delete, so a worker that joins meanwhile keeps it.
 */
export async function deleteOrphanConsumers(
  ctx: BackendContext,
  entries: readonly LiveWorker[],
  ageMs = ORPHAN_CONSUMER_AGE_MS,
): Promise<OrphanConsumersReport> {
  const report: OrphanConsumersReport = { checked: 0, deleted: [] };
  const { jsm, names } = ctx;
  const stream = names.streams.dispatch;
  const now = ctx.now();
  const candidates: { name: string; tag: string }[] = [];
  const advertised = lastAdvertised(ctx.loop.projection, entries, now);
  for await (const ci of jsm.consumers.list(stream)) {
    const tag = tagOf(ctx, ci);
    if (tag === null) continue;
    report.checked++;
    if (!(now - Date.parse(ci.created) > ageMs)) continue;
    if (!(now - (advertised.get(tag) ?? -Infinity) > ageMs)) continue;
    if (ci.num_ack_pending > 0) continue;
    candidates.push({ name: ci.name, tag });
  }
  if (candidates.length === 0) return report;
  const fresh = await ctx.registry.live();
  const again = lastAdvertised(ctx.loop.projection, fresh, ctx.now());
  for (const { name, tag } of candidates) {
    if (!(now - (again.get(tag) ?? -Infinity) > ageMs)) continue;
    try {
      if (await jsm.consumers.delete(stream, name)) {
        ctx.dispatchConsumers.forget(tag);
        report.deleted.push(name);
      }
    } catch (err: unknown) {
      // Gone already (another sweep by hand), or the server is busy: next sweep.
      ctx.log.warn('orphan consumer not deleted', { component: 'sweep', consumer: name, err });
    }
  }
  return report;
}

/** The tag of a `dispatch_<tag>` consumer of this topology, or null for any other consumer. */
function tagOf(ctx: BackendContext, ci: ConsumerInfo): string | null {
  const prefix = ctx.names.consumers.dispatch('');
  if (!ci.name.startsWith(prefix)) return null;
  const tag = ci.name.slice(prefix.length);
  if (!isId(tag) || ci.config.filter_subject !== ctx.names.subjects.dispatch(tag)) return null;
  return tag;
}
