import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamManager, MsgRequest, StoredMsg } from '@nats-io/jetstream';

/**
 * Every message of a stream matching `filter`, in sequence order, up to the stream's last
 * sequence when the scan started (later ones are new work, not the reader's business).
 *
 * Read with `STREAM.MSG.GET` and `next_by_subj` (2.9 has it), one message per round trip:
 * a work-queue stream refuses any consumer whose filter overlaps its own consumers', so it
 * cannot be read with an ordered consumer. Work-queue streams are short (what is in
 * flight), so this costs little when done once an hour (the sweep) or once a leadership
 * term (the reconciler's dispatch audit).
 */
export async function* scanStream(
  jsm: JetStreamManager,
  stream: string,
  filter: string,
): AsyncGenerator<StoredMsg> {
  const info = await jsm.streams.info(stream);
  if (info.state.messages === 0) return;
  const last = info.state.last_seq;
  let seq = info.state.first_seq;
  while (seq <= last) {
    // `next_by_subj` is missing from the client's MsgRequest type, not from the server.
    const query = { seq, next_by_subj: filter } as unknown as MsgRequest;
    const m = await jsm.streams.getMessage(stream, query);
    if (!m || m.seq > last) return;
    yield m;
    seq = m.seq + 1;
  }
}

/** Deletes one message; false when it was already gone (acked or moved meanwhile). */
export async function deleteIfThere(
  jsm: JetStreamManager,
  stream: string,
  seq: number,
): Promise<boolean> {
  try {
    return await jsm.streams.deleteMessage(stream, seq, false);
  } catch (err: unknown) {
    if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.NoMessageFound) {
      return false;
    }
    throw err;
  }
}
