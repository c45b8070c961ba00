import { Objm } from '@nats-io/obj';
import { commitStagedOutput } from '../../storage/staged-output.js';
import type { StagingParts } from '../../storage/staged-output.js';
import type { BackendContext } from '../context.js';

/**
 * The backend's side of staged outputs (src/storage/staged-output.ts): moves an attempt's
 * staged output into the object store when its holder's `result` is accepted. One move per
 * attempt at a time in this process: a worker whose `result` timed out while a large output
 * was being moved asks again, and that retry joins the move under way.
 */
export class StagedOutputs {
  private parts: Promise<StagingParts> | null = null;
  private readonly moving = new Map<string, Promise<unknown>>();

  constructor(private readonly ctx: BackendContext) {}

  /** Moves what `workerId` staged for `attemptId` into `key`; nothing when none is staged. */
  async commit(workerId: string, attemptId: string, key: string, bytes: number): Promise<void> {
    // With an S3 store, workers put outputs there themselves.
    if (this.ctx.config.s3) return;
    const under = this.moving.get(attemptId);
    if (under) return void (await under);
    const n = this.ctx.names;
    const move = this.open().then((parts) =>
      commitStagedOutput(parts, n.subjects.stage(workerId, attemptId), key, bytes),
    );
    this.moving.set(attemptId, move);
    try {
      await move;
    } finally {
      this.moving.delete(attemptId);
    }
  }

  private open(): Promise<StagingParts> {
    const { ctx } = this;
    this.parts ??= new Objm(ctx.nc).open(ctx.names.objectStores.outputs).then(
      (outputs) => ({ js: ctx.js, jsm: ctx.jsm, outputs, stream: ctx.names.streams.staging }),
      (err: unknown) => {
        this.parts = null;
        throw err;
      },
    );
    return this.parts;
  }
}
