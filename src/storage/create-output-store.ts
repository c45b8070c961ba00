import type { NatsConnection } from '@nats-io/transport-node';
import { names } from '../../streams/names.js';
import type { SonarConfig } from '../config.js';
import { assertOutputSize } from '../limits.js';
import { MinioOutputStore } from './minio-output-store.js';
import { NatsOutputStore } from './nats-output-store.js';
import type { OutputStore } from './output-store.js';

/** The settings an output store is chosen and bounded by. */
export type OutputStoreSettings = Pick<SonarConfig, 'prefix' | 's3' | 'maxOutputBytes'>;

/**
 * The configured output store (DESIGN.md section 6): the S3 bucket when `SONAR_S3_*` is set,
 * else the `<prefix>_outputs` object store. Either way a put larger than `SONAR_MAX_OUTPUT`
 * is refused with a ValidationError naming the limit, before any byte is sent.
 */
export async function createOutputStore(
  nc: NatsConnection,
  config: OutputStoreSettings,
): Promise<OutputStore> {
  const store = config.s3
    ? await MinioOutputStore.open(config.s3)
    : await NatsOutputStore.open(nc, names(config.prefix));
  return {
    put: async (key, data) => {
      assertOutputSize('output', data.byteLength, config.maxOutputBytes);
      return store.put(key, data);
    },
    get: (ref) => store.get(ref),
    stat: (ref) => store.stat(ref),
    read: (ref, signal) => store.read(ref, signal),
    delete: (ref) => store.delete(ref),
  };
}
