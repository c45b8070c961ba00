import type { LogMeta, Logger } from './log.js';

/**
 * A warning for what may happen thousands of times a second (a flood of forged or refused
 * messages): written at most once per gap, counting what happened since the line before, so
 * a flood costs a line every few seconds, not a line per message.
 */
export class ThrottledWarning {
  private count = 0;
  private loggedAt = -Infinity;

  /** `countField` names the count on the line (`ignored`, `refused`). */
  constructor(
    private readonly log: Logger,
    private readonly message: string,
    private readonly countField: string,
    private readonly gapMs = 10_000,
  ) {}

  /** Counts one; writes the line if the gap has passed, with `meta` of this one. */
  note(meta: LogMeta): void {
    this.count++;
    const now = performance.now();
    if (now - this.loggedAt < this.gapMs) return;
    this.log.warn(this.message, { ...meta, [this.countField]: this.count });
    this.count = 0;
    this.loggedAt = now;
  }
}
