import { ErrorCode, SonarError } from '../../actors/errors.js';
import type { OutputStore } from './output-store.js';
import type { StoredResult } from './results-sink.js';

/** The output when the record holds it (small outputs are copied into it), else null. */
export function inlineOutput(r: StoredResult): Uint8Array | null {
  if (r.json !== undefined) return new TextEncoder().encode(JSON.stringify(r.json));
  if (r.inline !== undefined) return Buffer.from(r.inline, 'base64');
  return null;
}

/** The output's bytes: from the record when small, else fetched from the output store. */
export async function readOutput(
  r: StoredResult,
  store: () => Promise<OutputStore>,
): Promise<Uint8Array> {
  const inline = inlineOutput(r);
  if (inline) return inline;
  const data = await (await store()).get(r.outputRef);
  if (!data) {
    throw new SonarError(
      ErrorCode.NotFound,
      `output ${r.outputRef} of ${r.runId}.${r.taskId} is not in the output store (purged?)`,
      { outputRef: r.outputRef },
    );
  }
  return data;
}
