import { dispatchRefOf } from '../../../streams/queues.js';
import type { BackendContext } from '../context.js';
import { scanStream } from '../storage/index.js';

/**
 * The attempts of Published tasks whose dispatch message is not in the dispatch stream.
 *
 * `dispatchTask` appends `TaskPublished` before it sends the message (the token travels only
 * in the message), so a leader that dies between the two, or whose send fails, leaves a task
 * no worker will ever be handed. A new leader, and a leader whose send failed, looks once:
 * the projection first caught up with every stored event, then the stream read to its end.
 * Reading after judging keeps it safe: a message acked meanwhile was acked after its start
 * answered, so the task's `TaskStarted` is stored, and a requeue judged on the Published
 * state is refused by the decision writer. A message sent after the read (a former leader
 * that paused past its lease) finds its attempt superseded, and its worker drops it.
 *
 * Call it only between the caller's own dispatches: one of them in flight would be missed.
 * Cost: one stream read per dispatch message (what is in flight), and only when some task is
 * Published.
 */
export async function undeliveredAttempts(ctx: BackendContext): Promise<Set<string>> {
  await ctx.loop.waitFor(await ctx.store.endSeq(ctx.loop.projection.lastSeq));
  const missing = new Set<string>();
  const p = ctx.loop.projection;
  for (const key of p.tasksByState.Published) {
    const attemptId = p.tasks.get(key)!.snapshot.context.attemptId;
    if (attemptId !== null) missing.add(attemptId);
  }
  if (missing.size === 0) return missing;
  const stream = ctx.names.streams.dispatch;
  for await (const m of scanStream(ctx.jsm, stream, ctx.names.subjects.dispatchAll)) {
    const ref = dispatchRefOf(m);
    if (ref !== null) missing.delete(ref.attemptId);
    if (missing.size === 0) break;
  }
  return missing;
}
