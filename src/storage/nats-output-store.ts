import { createHash } from 'node:crypto';
import type { JetStreamClient } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';
import type { OutputInfo, OutputStore } from './output-store.js';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { jetstreamOf } from '../../streams/jetstream-api.js';

/**
 * Chunks a read holds ahead of its reader. The client's own `get` pushes the whole object
 * into a stream with no backpressure; a pull of a few chunks at a time keeps a slow reader's
 * memory at this many chunks (128 KiB each by default).
 */
const READ_AHEAD_CHUNKS = 4;

/** A digest as `SHA-256=` writes it, in one spelling (base64url without padding). */
const normalDigest = (b64: string): string =>
  b64.replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');

/**
 * Outputs in the `<prefix>_outputs` JetStream object store (the default, DESIGN.md section 2).
 * The ref is the object name itself (`<runId>/<taskId>/<attemptId>`): a worker and every
 * backend reach the same store through NATS, so nothing else is needed to find it.
 */
export class NatsOutputStore implements OutputStore {
  private constructor(
    private readonly os: ObjectStore,
    private readonly js: JetStreamClient,
    private readonly bucket: string,
  ) {}

  /** Opens the store the topology created (the backend provisions it at start). */
  static async open(nc: NatsConnection, n: Names): Promise<NatsOutputStore> {
    const bucket = n.objectStores.outputs;
    const js = await jetstreamOf(nc, n);
    return new NatsOutputStore(await new Objm(js).open(bucket), js, bucket);
  }

  async put(key: string, data: Uint8Array): Promise<string> {
    await this.os.putBlob({ name: key }, data);
    return key;
  }

  async get(ref: string): Promise<Uint8Array | null> {
    const data = await this.os.getBlob(ref);
    // The client hands back a Buffer at some sizes: every store answers a plain Uint8Array.
    return data && new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  }

  async stat(ref: string): Promise<OutputInfo | null> {
    const info = await this.os.info(ref);
    return info && !info.deleted ? { size: info.size } : null;
  }

  /**
   * The object's chunks through an ordered pull consumer on its chunk subject (the object
   * store's layout: stream `OBJ_<bucket>`, subject `$O.<bucket>.C.<nuid>`), checked against
   * the stored size and SHA-256 digest as the client's own `get` does.
   */
  async *read(ref: string, signal: AbortSignal): AsyncIterable<Uint8Array> {
    const info = await this.os.info(ref);
    if (!info || info.deleted)
      throw new SonarError(ErrorCode.NotFound, `no object ${JSON.stringify(ref)}`, { ref });
    if (info.size === 0) return;
    signal.throwIfAborted();
    const consumer = await this.js.consumers.get(`OBJ_${this.bucket}`, {
      filter_subjects: `$O.${this.bucket}.C.${info.nuid}`,
    });
    const messages = await consumer.consume({ max_messages: READ_AHEAD_CHUNKS });
    const stop = (): void => void messages.close().catch(() => undefined);
    signal.addEventListener('abort', stop, { once: true });
    const sha = createHash('sha256');
    let got = 0;
    try {
      for await (const m of messages) {
        if (m.data.byteLength > 0) {
          sha.update(m.data);
          got += m.data.byteLength;
          yield m.data;
        }
        if (m.info.pending === 0 || got >= info.size) break;
      }
      signal.throwIfAborted();
    } finally {
      signal.removeEventListener('abort', stop);
      await messages.close().catch(() => undefined);
      // An ordered consumer outlives its close by its inactive threshold (minutes): one per
      // finalized output would pile up on the stream.
      await consumer.delete().catch(() => undefined);
    }
    if (got !== info.size) {
      throw new SonarError(
        ErrorCode.Decode,
        `object ${JSON.stringify(ref)} read ${got} bytes of its ${info.size}`,
        { ref },
      );
    }
    const want = normalDigest(info.digest.replace(/^SHA-256=/i, ''));
    if (normalDigest(sha.digest('base64')) !== want) {
      throw new SonarError(
        ErrorCode.Decode,
        `object ${JSON.stringify(ref)} does not match its digest ${info.digest}`,
        { ref },
      );
    }
  }

  async delete(ref: string): Promise<void> {
    // A missing object is a no-op (the client answers success: false), as a delete should be.
    await this.os.delete(ref);
  }
}
