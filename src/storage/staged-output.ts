/**
 * Outputs over the inline limit from workers that may not write the object store (secure
 * mode): the object store's own writes need rollups and purges, which would let any writer
 * wipe every stored output. Instead a worker stages the bytes on its own subject of the
 * staging stream, `<prefix>.stage.<workerId>.<attemptId>`, which only it may publish to,
 * and the backend moves them into the object store when it accepts the attempt's `result`
 * from that same worker. So an output reaches the store only from the worker that holds the
 * attempt, under the attempt's own key.
 *
 * An upload is its chunks followed by an end marker, all carrying one upload id; the marker
 * also carries the size and SHA-256 of the whole. A retried upload adds a new id; the backend
 * takes the last marker's upload and skips every other message on the subject.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { ObjectStore } from '@nats-io/obj';
import { headers } from '@nats-io/transport-node';
import { ValidationError } from '../../actors/errors.js';
import { STAGE_CHUNK_BYTES } from '../../streams/topology.js';
import { newId } from '../ids.js';

/** The upload a message belongs to. */
export const UPLOAD_HEADER = 'Sonar-Upload';
/** On the end marker only: the whole output's size in bytes. */
export const BYTES_HEADER = 'Sonar-Bytes';
/** On the end marker only: the whole output's SHA-256, hex. */
export const SHA256_HEADER = 'Sonar-Sha256';

/** Chunks the backend holds ahead of the object store's writer. */
const READ_AHEAD_CHUNKS = 4;
/**
 * How long the move waits for the next staged message. The marker was read first, so every
 * message before it is stored: none arriving means they were removed meanwhile (aged out,
 * or moved by another backend answering a retry of the same result).
 */
const IDLE_MS = 10_000;

/** The iterator's next message, or a rejection after `ms` without one. */
async function nextWithin<T>(it: AsyncIterator<T>, ms: number, what: string) {
  let timer: NodeJS.Timeout | undefined;
  const idle = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no staged message on ${what} for ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([it.next(), idle]);
  } finally {
    clearTimeout(timer);
  }
}

/** Stages `data` on `subject` (the worker's own staging subject for the attempt). */
export async function stageOutput(
  js: JetStreamClient,
  subject: string,
  data: Uint8Array,
): Promise<void> {
  const upload = newId();
  const h = (): ReturnType<typeof headers> => {
    const m = headers();
    m.set(UPLOAD_HEADER, upload);
    return m;
  };
  for (let at = 0; at < data.byteLength; at += STAGE_CHUNK_BYTES) {
    await js.publish(subject, data.subarray(at, at + STAGE_CHUNK_BYTES), { headers: h() });
  }
  const end = h();
  end.set(BYTES_HEADER, String(data.byteLength));
  end.set(SHA256_HEADER, createHash('sha256').update(data).digest('hex'));
  await js.publish(subject, new Uint8Array(), { headers: end });
}

export interface StagingParts {
  js: JetStreamClient;
  jsm: JetStreamManager;
  outputs: ObjectStore;
  /** The staging stream's name. */
  stream: string;
}

const refusal = (message: string): ValidationError =>
  new ValidationError(message, [{ path: 'output.ref', message }]);

/**
 * Moves the output staged on `subject` into the object store under `key`, checked against
 * `bytes` and the marker's digest, then deletes the staged messages. `none` when nothing is
 * staged there: an output put straight into the store (open mode), or one already moved by
 * an earlier try of the same `result`.
 */
export async function commitStagedOutput(
  parts: StagingParts,
  subject: string,
  key: string,
  bytes: number,
): Promise<'committed' | 'none'> {
  const end = await parts.jsm.streams
    .getMessage(parts.stream, { last_by_subj: subject })
    .catch(() => null);
  if (!end) return 'none';
  const upload = end.header.get(UPLOAD_HEADER);
  const size = Number(end.header.get(BYTES_HEADER));
  const digest = end.header.get(SHA256_HEADER);
  if (upload === '' || digest === '' || !Number.isInteger(size)) {
    throw refusal(`the output staged on ${subject} has no end marker: stage it again`);
  }
  if (size !== bytes) {
    throw refusal(`'output.bytes' is ${bytes} but the output staged on ${subject} is ${size}`);
  }
  const consumer = await parts.js.consumers.get(parts.stream, { filter_subjects: subject });
  const messages = await consumer.consume({ max_messages: READ_AHEAD_CHUNKS });
  const it = messages[Symbol.asyncIterator]();
  const seen: number[] = [];
  const sha = createHash('sha256');
  let got = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const next = await nextWithin(it, IDLE_MS, subject);
        if (next.done) return controller.error(new Error(`${subject} ended before its marker`));
        const m = next.value;
        seen.push(m.seq);
        if (m.seq >= end.seq) return controller.close();
        if (m.headers?.get(UPLOAD_HEADER) !== upload || m.data.byteLength === 0) continue;
        got += m.data.byteLength;
        if (got > size) return controller.error(new Error(`${subject} holds over ${size} bytes`));
        sha.update(m.data);
        return controller.enqueue(m.data);
      }
    },
  });
  try {
    await parts.outputs.put({ name: key }, body);
  } finally {
    // Ends the iterator first: close() settles only once its messages are done with.
    await it.return?.();
    await messages.close().catch(() => undefined);
    await consumer.delete().catch(() => undefined);
  }
  if (got !== size || sha.digest('hex') !== digest) {
    await parts.outputs.delete(key).catch(() => undefined);
    throw refusal(`the output staged on ${subject} does not match its size and digest`);
  }
  // One message at a time: a purge filtered by subject makes 2.9 move every consumer of the
  // stream past messages appended meanwhile (docs/internals.md, nats-server 2.9), other copies' too.
  for (const seq of seen) {
    await parts.jsm.streams.deleteMessage(parts.stream, seq, false).catch(() => undefined);
  }
  return 'committed';
}
