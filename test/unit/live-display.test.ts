import { describe, expect, it } from 'vitest';
import { fitLine, LiveDisplay } from '../../src/display/live-display.js';
import { bar, progressLines, RateTracker, shortDuration } from '../../src/display/run-progress.js';
import type { StepProgress } from '../../src/display/run-progress.js';

const sink = () => {
  const writes: string[] = [];
  return { writes, out: { write: (t: string) => writes.push(t) } };
};

describe('LiveDisplay', () => {
  it('redraws in place on a terminal: cursor up over the last block, clear, draw', () => {
    const { writes, out } = sink();
    const d = new LiveDisplay({ tty: true, out, columns: () => 80 });
    d.update(['a', 'b']);
    d.update(['c']);
    d.note('event');
    expect(writes).toEqual([
      'a\nb\n',
      '\u001b[2A\u001b[0J',
      'c\n',
      '\u001b[1A\u001b[0J',
      'event\n',
      'c\n',
    ]);
  });

  it('prints plain blocks at most every interval when piped, and the last one at the end', () => {
    const { writes, out } = sink();
    const d = new LiveDisplay({ tty: false, out, plainIntervalMs: 60_000 });
    d.update(['first']);
    d.update(['second']);
    d.note('event');
    d.finish();
    expect(writes).toEqual(['first\n', 'event\n', 'second\n']);
  });

  it('cuts long lines to the terminal width, colors kept whole', () => {
    expect(fitLine('\u001b[32mabcdef\u001b[0m', 3)).toBe('\u001b[32mabc\u001b[0m');
    expect(fitLine('abc', 3)).toBe('abc');
  });
});

describe('run progress', () => {
  it('draws bars, rates and ETAs per step', () => {
    let now = 0;
    const rates = new RateTracker(() => now);
    const step = (done: number): StepProgress => ({
      stepId: 'build',
      state: 'Ready',
      starved: false,
      total: 10,
      done,
      counts: {
        Pending: 10 - done,
        Published: 0,
        Running: 0,
        Finalizing: 0,
        Succeeded: done,
        Failed: 0,
        Dead: 0,
        Cancelled: 0,
        Poisoned: 0,
      },
    });
    expect(progressLines([step(0)], rates, false)[0]).toMatch(
      /build {2}\[\.{20}\] +0\/10 +-\/s {2}ETA -/,
    );
    now = 2_000;
    expect(progressLines([step(4)], rates, false)[0]).toBe(
      '  build  [########............]       4/10    2.0/s  ETA 3s     Ready  pending 6 · ok 4',
    );
    expect(bar(10, 10, 4)).toBe('[####]');
    expect(shortDuration(125_000)).toBe('2m05s');
  });
});
