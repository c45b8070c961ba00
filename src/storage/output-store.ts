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
  delete(ref: string): Promise<void>;
}

/** Outputs up to this size travel inline in the result, base64. */
export const INLINE_OUTPUT_MAX = 16 * 1024;

export const outputKey = (runId: string, taskId: string, attemptId: string): string =>
  `${runId}/${taskId}/${attemptId}`;
