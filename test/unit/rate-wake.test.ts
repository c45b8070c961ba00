import { describe, expect, it } from 'vitest';
import { nextRatePassAt, parseTagRate } from '../../actors/reconciler/tag-rates.js';

const rate = parseTagRate('2/500ms');

describe('nextRatePassAt', () => {
  it('wakes when an emptied bucket gets its next token back', () => {
    const tags = [{ rate, times: [1_000, 1_000], leftWhenPlanned: 2, placed: 2 }];
    expect(nextRatePassAt(tags, 1_010)).toBe(1_500);
  });

  it('wakes at once when a bucket the pass found empty has a token back already', () => {
    // The pass planned at 1,499.5 (a timer a millisecond early) and ended at 1,500.5.
    const tags = [{ rate, times: [1_000, 1_000], leftWhenPlanned: 0, placed: 0 }];
    expect(nextRatePassAt(tags, 1_500.5)).toBe(1_500.5);
  });

  it('does not wake for a bucket with tokens the pass left unused', () => {
    // Nothing to place, or no room: another pass now would place nothing either.
    const tags = [{ rate, times: [1_000], leftWhenPlanned: 1, placed: 0 }];
    expect(nextRatePassAt(tags, 1_010)).toBeNull();
  });

  it('never wakes for a closed tag, nor for a tag the planner did not look at', () => {
    expect(
      nextRatePassAt(
        [
          { rate: parseTagRate('0/s'), times: [], leftWhenPlanned: 0, placed: 0 },
          { rate, times: [], leftWhenPlanned: undefined, placed: 0 },
        ],
        1_000,
      ),
    ).toBeNull();
  });

  it('takes the earliest of several tags', () => {
    const slow = parseTagRate('1/s');
    const tags = [
      { rate: slow, times: [1_000], leftWhenPlanned: 1, placed: 1 },
      { rate, times: [1_100, 1_100], leftWhenPlanned: 2, placed: 2 },
    ];
    expect(nextRatePassAt(tags, 1_100)).toBe(1_600);
  });
});
