import type { TaskContext } from '../../../actors/task/task.machine.js';
import type { FinalizeJob } from '../../../streams/queues.js';
import { outputSizeProblem } from '../../limits.js';
import { InvalidJsonError, JsonStreamValidator } from '../../storage/json-stream-validator.js';
import { INLINE_OUTPUT_MAX, outputKey } from '../../storage/output-store.js';
import type { OutputStore } from '../../storage/output-store.js';
import { bodyOf } from '../../storage/results-sink.js';
import type { OutputBody } from '../../storage/results-sink.js';
import { withDeadline } from './finalize-deadline.js';
import { PermanentFinalizeError } from './finalize-errors.js';

/** What preparing an output needs from its backend. */
export interface OutputDeps {
  outputs: OutputStore;
  /** `SONAR_MAX_OUTPUT`: a larger stored output is refused from its metadata, unread. */
  maxOutputBytes: number;
  /** The deadline of each object read (and each sink write). */
  ioTimeoutMs: number;
}

/**
 * The output of a job, checked and validated, as the sink will receive it. Memory stays
 * bounded by a few chunks whatever the output's size: a stored output is checked against its
 * metadata first (the attempt's own object, the size the result declared, `SONAR_MAX_OUTPUT`),
 * then a `json` one is validated as it streams, without being parsed into a value.
 * @throws PermanentFinalizeError when no retry can help (missing, foreign, too large, invalid).
 */
export async function prepareOutput(
  deps: OutputDeps,
  job: FinalizeJob,
  task: TaskContext,
  kind: 'json' | 'bytes',
): Promise<OutputBody> {
  const key = `${job.runId}.${job.taskId}`;
  const inline = job.outputInline ?? (job.outputRef === 'inline' ? task.output?.inline : null);
  if (inline !== null && inline !== undefined) {
    const bytes = Buffer.from(inline, 'base64');
    if (kind === 'json') validateJson([bytes], key);
    return bodyOf(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }
  if (job.outputRef === 'inline') {
    throw new PermanentFinalizeError(`output of ${key} is missing: no inline bytes`);
  }
  const ref = job.outputRef;
  checkOwnObject(job);
  const info = await withDeadline(`stat of output ${JSON.stringify(ref)}`, deps.ioTimeoutMs, () =>
    deps.outputs.stat(ref),
  );
  if (info === null) {
    throw new PermanentFinalizeError(
      `output ${JSON.stringify(ref)} of ${key} is missing from the output store`,
      { outputRef: ref },
    );
  }
  const tooLarge = outputSizeProblem(info.size, deps.maxOutputBytes);
  if (tooLarge !== null) {
    throw new PermanentFinalizeError(`output ${JSON.stringify(ref)} of ${key} ${tooLarge}`, {
      outputRef: ref,
      size: info.size,
    });
  }
  const declared = task.output?.bytes;
  if (declared !== undefined && declared !== info.size) {
    throw new PermanentFinalizeError(
      `output ${JSON.stringify(ref)} of ${key} is ${info.size} bytes in the output store, but the result declared 'bytes' ${declared}`,
      { outputRef: ref, size: info.size, bytes: declared },
    );
  }
  const small = info.size <= INLINE_OUTPUT_MAX;
  const chunks = (signal: AbortSignal) => deps.outputs.read(ref, signal);
  // A large `bytes` output needs no read here: the sink streams it if it wants it.
  if (kind !== 'json' && !small) return { bytes: info.size, small: null, chunks };
  const kept = await withDeadline(`read of output ${JSON.stringify(ref)}`, deps.ioTimeoutMs, (s) =>
    scan(chunks(s), kind === 'json' ? key : null, small),
  );
  if (!kept) return { bytes: info.size, small: null, chunks };
  return bodyOf(kept);
}

/**
 * A stored ref names the attempt's own object (`<runId>/<taskId>/<attemptId>`, where the
 * worker SDK uploads it): a result cannot point at another task's output.
 */
function checkOwnObject(job: FinalizeJob): void {
  const own = outputKey(job.runId, job.taskId, job.attemptId);
  if (job.outputRef === own) return;
  throw new PermanentFinalizeError(
    `output ref ${JSON.stringify(job.outputRef)} of ${job.runId}.${job.taskId} is not attempt ${job.attemptId}'s own object ${JSON.stringify(own)}`,
    { outputRef: job.outputRef, expected: own },
  );
}

/**
 * Reads `chunks` through, validating JSON when `jsonKey` is set; returns the bytes when
 * `keep` (a small output, for the sink), else null.
 */
async function scan(
  chunks: AsyncIterable<Uint8Array>,
  jsonKey: string | null,
  keep: boolean,
): Promise<Uint8Array | null> {
  const validator = jsonKey === null ? null : new JsonStreamValidator();
  const kept: Uint8Array[] = [];
  for await (const chunk of chunks) {
    if (validator) push(validator, chunk, jsonKey!);
    if (keep) kept.push(chunk);
  }
  if (validator) finish(validator, jsonKey!);
  return keep ? Buffer.concat(kept) : null;
}

function validateJson(chunks: Uint8Array[], key: string): void {
  const validator = new JsonStreamValidator();
  for (const chunk of chunks) push(validator, chunk, key);
  finish(validator, key);
}

function push(validator: JsonStreamValidator, chunk: Uint8Array, key: string): void {
  try {
    validator.push(chunk);
  } catch (err: unknown) {
    throw notJson(err, key);
  }
}

function finish(validator: JsonStreamValidator, key: string): void {
  try {
    validator.end();
  } catch (err: unknown) {
    throw notJson(err, key);
  }
}

/** A step with `output: "json"` needs valid JSON (DESIGN.md section 7). */
function notJson(err: unknown, key: string): unknown {
  if (!(err instanceof InvalidJsonError)) return err;
  return new PermanentFinalizeError(`output of ${key} is not valid JSON: ${err.message}`);
}
