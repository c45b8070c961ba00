import type { BackendContext } from '../../context.js';

/** How long a request waits for this backend's projection to catch up before `unavailable`. */
const CATCH_UP_TIMEOUT_MS = 5_000;

function waitForSeq(ctx: BackendContext, seq: number): Promise<void> {
  return ctx.loop.waitFor(seq, CATCH_UP_TIMEOUT_MS);
}

/**
 * Waits until this backend's projection holds every event of `subject` stored so far.
 * Why: another backend may have written it a moment ago (the reconciler publishes a task on
 * one backend and the worker's `start` lands on another), and a request must be judged on
 * the aggregate as it is, not as this process last saw it. One last-by-subject read.
 */
export async function syncSubject(ctx: BackendContext, subject: string): Promise<void> {
  await waitForSeq(ctx, await ctx.store.lastSeqOf(subject));
}

/**
 * Waits until the projection holds the whole stream as it stands now (submit, cancel): up to
 * the last event stored, which is not the stream's last sequence once retention purged the
 * newest events (EventStore.endSeq).
 */
export async function syncAll(ctx: BackendContext): Promise<void> {
  await waitForSeq(ctx, await ctx.store.endSeq(ctx.loop.position));
}

/** Per backend: the stream read that the calls arriving now will share, until it starts. */
const nextRead = new WeakMap<BackendContext, Promise<void>>();

/**
 * `syncAll` for requests that arrive together: waits until the projection holds every event
 * stored before this call. The read of the stream's end starts on the next event-loop turn,
 * after every call that joins it arrived, so each caller gets the guarantee of its own
 * read; under load one read serves many requests instead of a last-by-subject read each
 * (worker requests otherwise cost two API calls apiece: one for the worker, one for the task).
 */
export function syncRecent(ctx: BackendContext): Promise<void> {
  let read = nextRead.get(ctx);
  if (!read) {
    read = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      // From here on, a new call needs a read that starts after it: a new batch.
      nextRead.delete(ctx);
      return syncAll(ctx);
    });
    nextRead.set(ctx, read);
  }
  return read;
}
