/**
 * Where task outputs larger than 16 KiB live (DESIGN.md section 6): the `sonar_outputs` object
 * store by default, or an S3 bucket (MinIO) when `SONAR_S3_*` is set. Workers put, the
 * finalizer gets; keys are `<runId>/<taskId>/<attemptId>`.
 */
export interface OutputStore {
  /** Stores `data` under `key`; returns the ref a result carries. */
  put(key: string, data: Uint8Array): Promise<string>;
  /** The bytes under `ref`, or null when there is no such object. */
  get(ref: string): Promise<Uint8Array | null>;
  /** The size of the object under `ref` from its metadata (no byte read), or null. */
  stat(ref: string): Promise<OutputInfo | null>;
  /**
   * The bytes under `ref` in chunks, read ahead by a few chunks only, so memory does not grow
   * with the object. Stops (and throws) once `signal` aborts; throws when the object is
   * missing or does not match its stored size or digest.
   */
  read(ref: string, signal: AbortSignal): AsyncIterable<Uint8Array>;
  delete(ref: string): Promise<void>;
}

/** What a store knows of an object without reading it. */
export interface OutputInfo {
  /** Stored size in bytes. */
  size: number;
}

/** Outputs up to this size travel inline in the result, base64. */
export const INLINE_OUTPUT_MAX = 16 * 1024;

export const outputKey = (runId: string, taskId: string, attemptId: string): string =>
  `${runId}/${taskId}/${attemptId}`;
