import { Objm } from '@nats-io/obj';
import type { ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Names } from '../../streams/names.js';
import type { OutputStore } from './output-store.js';

/**
 * Outputs in the `<prefix>_outputs` JetStream object store (the default, DESIGN.md section 2).
 * The ref is the object name itself (`<runId>/<taskId>/<attemptId>`): a worker and every
 * backend reach the same store through NATS, so nothing else is needed to find it.
 */
export class NatsOutputStore implements OutputStore {
  private constructor(private readonly os: ObjectStore) {}

  /** Opens the store the topology created (the backend provisions it at start). */
  static async open(nc: NatsConnection, n: Names): Promise<NatsOutputStore> {
    return new NatsOutputStore(await new Objm(nc).open(n.objectStores.outputs));
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

  async delete(ref: string): Promise<void> {
    // A missing object is a no-op (the client answers success: false), as a delete should be.
    await this.os.delete(ref);
  }
}
