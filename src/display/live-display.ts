/** Where a display writes: process.stdout, or a test's sink. */
export interface DisplayOutput {
  write(text: string): unknown;
}

export interface LiveDisplayOptions {
  /** Redraw in place (a terminal); otherwise print plain lines now and then. */
  tty: boolean;
  /**
   * When not a terminal: print the block at most this often (and always on `finish()`).
   * @defaultValue 2000
   */
  plainIntervalMs?: number;
  out?: DisplayOutput;
  /**
   * Terminal width: longer lines are cut, since a wrapped line would break the redraw.
   * @defaultValue `process.stdout.columns`, else 120
   */
  columns?: () => number;
}

/** Cuts `line` to `width` visible characters; ANSI color codes count for nothing. */
export function fitLine(line: string, width: number): string {
  let visible = 0;
  let i = 0;
  while (i < line.length) {
    if (line[i] === '\u001b') {
      const end = line.indexOf('m', i);
      if (end !== -1) {
        i = end + 1;
        continue;
      }
    }
    if (visible === width) return `${line.slice(0, i)}\u001b[0m`;
    visible++;
    i++;
  }
  return line;
}

/**
 * A block of status lines kept up to date. On a terminal it is redrawn in place (cursor up,
 * clear to the end of the screen); piped, it becomes plain lines every few seconds, so a log
 * file or CI output stays readable. `note()` prints a permanent line above the block.
 */
export class LiveDisplay {
  private drawn = 0;
  private lines: string[] = [];
  private lastPlainAt = -Infinity;
  /** Piped: whether the current lines were printed already. */
  private printed = false;
  private readonly out: DisplayOutput;

  constructor(private readonly opts: LiveDisplayOptions) {
    this.out = opts.out ?? process.stdout;
  }

  update(lines: string[]): void {
    this.lines = lines;
    this.printed = false;
    if (this.opts.tty) {
      this.redraw();
      return;
    }
    const now = performance.now();
    if (now - this.lastPlainAt < (this.opts.plainIntervalMs ?? 2_000)) return;
    this.lastPlainAt = now;
    this.printed = true;
    this.out.write(`${lines.join('\n')}\n`);
  }

  note(line: string): void {
    if (!this.opts.tty) {
      this.out.write(`${line}\n`);
      return;
    }
    this.clear();
    this.out.write(`${line}\n`);
    this.redraw();
  }

  /** Leaves the last block on screen (piped: prints it once more, as the final state). */
  finish(): void {
    if (this.opts.tty) this.redraw();
    else if (this.lines.length > 0 && !this.printed) this.out.write(`${this.lines.join('\n')}\n`);
    this.drawn = 0;
    this.lines = [];
  }

  private clear(): void {
    if (this.drawn > 0) this.out.write(`\u001b[${this.drawn}A\u001b[0J`);
    this.drawn = 0;
  }

  private redraw(): void {
    this.clear();
    if (this.lines.length === 0) return;
    const width = Math.max(20, (this.opts.columns?.() ?? process.stdout.columns ?? 120) - 1);
    this.out.write(`${this.lines.map((l) => fitLine(l, width)).join('\n')}\n`);
    this.drawn = this.lines.length;
  }
}
