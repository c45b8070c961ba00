import type { Logger } from '../../log.js';
import type { Component } from '../backend.js';
import type { BackendContext } from '../context.js';
import { snapshotFingerprint, storedSnapshot, writeSnapshot } from './snapshot.js';

/** User input; every field optional (STYLE C3). */
export interface SnapshotterOptions {
  /**
   * The leader writes a snapshot once this many events came after the stored one. Bounds a
   * restart's tail to what replays in about a second (docs/benchmarks.md).
   * @defaultValue 100_000
   */
  everyEvents?: number;
  /**
   * The leader also writes one when this long has passed and any event came since, so a
   * quiet system's snapshot does not lag far behind.
   * @defaultValue 600_000 (10 min)
   */
  everyMs?: number;
  /**
   * How often the leader looks.
   * @defaultValue 5_000
   */
  checkMs?: number;
  /**
   * On a clean stop, any backend writes one when at least this many events are not in the
   * stored snapshot (its restart, or the next backend's, then replays no tail).
   * @defaultValue 1
   */
  onStopMinEvents?: number;
}

/**
 * Writes projection snapshots (snapshot.ts) on a schedule. Only the leader (the node named by
 * the last `ReconcilerElected`) writes while running: every backend holds the same
 * projection, so one writer suffices, and the leader already exists. Any backend writes on a
 * clean stop. A write in another process meanwhile is harmless: writes are a compare-and-set
 * and never replace a newer snapshot.
 */
export class Snapshotter implements Component {
  readonly name = 'snapshotter';
  private readonly log: Logger;
  private readonly everyEvents: number;
  private readonly everyMs: number;
  private readonly checkMs: number;
  private readonly onStopMinEvents: number;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  /** Sequence of the stored snapshot as last known, and when it was last checked or written. */
  private storedSeq = 0;
  private storedAt = 0;

  constructor(
    private readonly ctx: BackendContext,
    opts: SnapshotterOptions = {},
  ) {
    this.log = ctx.log.child({ component: 'snapshot' });
    this.everyEvents = opts.everyEvents ?? 100_000;
    this.everyMs = opts.everyMs ?? 600_000;
    this.checkMs = opts.checkMs ?? 5_000;
    this.onStopMinEvents = opts.onStopMinEvents ?? 1;
  }

  async start(): Promise<void> {
    this.storedSeq = await this.usableStoredSeq();
    this.storedAt = performance.now();
    this.timer = setInterval(() => this.check(), this.checkMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.writing;
    if (this.ctx.loop.position - this.storedSeq >= this.onStopMinEvents) await this.write();
  }

  private isLeader(): boolean {
    return this.ctx.loop.projection.leader?.nodeId === this.ctx.nodeId;
  }

  private check(): void {
    if (this.writing || !this.isLeader()) return;
    const behind = this.ctx.loop.position - this.storedSeq;
    const due =
      behind >= this.everyEvents ||
      (behind > 0 && performance.now() - this.storedAt >= this.everyMs);
    if (!due) return;
    this.writing = this.write().finally(() => {
      this.writing = null;
    });
  }

  private async write(): Promise<void> {
    try {
      const written = await writeSnapshot(this.deps());
      // Null: the stored one was as new, or another backend wrote first; either way re-read.
      this.storedSeq = written?.seq ?? (await this.usableStoredSeq());
      this.storedAt = performance.now();
    } catch (err: unknown) {
      this.log.warn('projection snapshot not written', { err });
    }
  }

  /**
   * The stored snapshot's sequence; 0 when none, or when another build wrote it. A backend
   * that started from another build's snapshot (events purged, see loadSnapshot) thus
   * replaces it with one of its own fingerprint at the next write.
   */
  private async usableStoredSeq(): Promise<number> {
    const s = await storedSnapshot(this.deps());
    return s && s.fingerprint === snapshotFingerprint() ? s.seq : 0;
  }

  private deps() {
    const { nc, jsm, names, loop, nodeId } = this.ctx;
    return { nc, jsm, names, loop, nodeId, log: this.log };
  }
}

/** The component factory `defaultParts` registers. */
export const snapshotter =
  (opts: SnapshotterOptions = {}) =>
  (ctx: BackendContext): Component =>
    new Snapshotter(ctx, opts);
