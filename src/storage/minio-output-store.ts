import { Client, S3Error } from 'minio';
import type { S3Config } from '../config.js';
import type { OutputInfo, OutputStore } from './output-store.js';

/** S3 error codes that mean "no such object" (S3, MinIO and s3rver spell it differently). */
const MISSING = new Set(['NoSuchKey', 'NotFound', 'NoSuchObject']);

const isMissing = (err: unknown): boolean =>
  err instanceof S3Error
    ? MISSING.has(String(err.code))
    : typeof err === 'object' &&
      err !== null &&
      MISSING.has(String((err as { code?: unknown }).code));

/**
 * Outputs in an S3 bucket through the `minio` client (MinIO, or any S3), when `SONAR_S3_*`
 * is set; workers and backends share that setting. The ref is the object key.
 */
export class MinioOutputStore implements OutputStore {
  private constructor(
    private readonly client: Client,
    private readonly bucket: string,
  ) {}

  /**
   * Connects and makes sure the bucket exists (creating it when missing), so that the first
   * upload does not fail for want of a bucket.
   */
  static async open(s3: S3Config): Promise<MinioOutputStore> {
    const url = new URL(s3.endpoint);
    const useSSL = url.protocol === 'https:';
    const client = new Client({
      endPoint: url.hostname,
      port: url.port === '' ? (useSSL ? 443 : 80) : Number(url.port),
      useSSL,
      accessKey: s3.accessKey,
      secretKey: s3.secretKey,
      // A fixed region spares a GetBucketLocation round trip before each first request.
      region: 'us-east-1',
      // Path-style requests work with MinIO, S3 and local stand-ins alike (no bucket DNS).
      pathStyle: true,
    });
    if (!(await client.bucketExists(s3.bucket))) {
      try {
        await client.makeBucket(s3.bucket, 'us-east-1');
      } catch (err: unknown) {
        // Another process created it first.
        if (!(await client.bucketExists(s3.bucket))) throw err;
      }
    }
    return new MinioOutputStore(client, s3.bucket);
  }

  async put(key: string, data: Uint8Array): Promise<string> {
    // A known size keeps the upload a single PUT (no multipart) up to the part size.
    await this.client.putObject(
      this.bucket,
      key,
      Buffer.from(data.buffer, data.byteOffset, data.byteLength),
      data.byteLength,
    );
    return key;
  }

  async get(ref: string): Promise<Uint8Array | null> {
    let stream;
    try {
      stream = await this.client.getObject(this.bucket, ref);
    } catch (err: unknown) {
      if (isMissing(err)) return null;
      throw err;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    const all = Buffer.concat(chunks);
    return new Uint8Array(all.buffer, all.byteOffset, all.byteLength);
  }

  async stat(ref: string): Promise<OutputInfo | null> {
    try {
      return { size: (await this.client.statObject(this.bucket, ref)).size };
    } catch (err: unknown) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  /** The object's body as it arrives: the HTTP stream's own backpressure bounds it. */
  async *read(ref: string, signal: AbortSignal): AsyncIterable<Uint8Array> {
    signal.throwIfAborted();
    const stream = await this.client.getObject(this.bucket, ref);
    const stop = (): void => void stream.destroy(new Error(`read of ${ref} aborted`));
    signal.addEventListener('abort', stop, { once: true });
    try {
      for await (const chunk of stream) yield chunk as Buffer;
      signal.throwIfAborted();
    } catch (err: unknown) {
      // The abort's reason, not the stream's own "destroyed" error, says why it stopped.
      signal.throwIfAborted();
      throw err;
    } finally {
      signal.removeEventListener('abort', stop);
      stream.destroy();
    }
  }

  async delete(ref: string): Promise<void> {
    try {
      await this.client.removeObject(this.bucket, ref);
    } catch (err: unknown) {
      if (!isMissing(err)) throw err;
    }
  }
}
