import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { replay } from '../../actors/replay.js';
import { replayView } from '../../actors/replay-view.js';

/**
 * What a backend older than schedules does with their events (docs/contract.md): its fold has
 * no `schedule` aggregate, so each schedule event is skipped (`not an event subject`, logged
 * and counted) and the fold goes on. Checked here by folding the scenario without its
 * schedule lines, which is that older fold's input in effect: the runs, steps, tasks and
 * workers come out the same, since no other aggregate depends on a schedule's state. (The
 * fold of the previous commit was run on this scenario by hand too: same runs, 27 skips.)
 */
const lines = readFileSync(new URL('./scenarios/schedules.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l !== '');

const isScheduleLine = (l: string): boolean =>
  /"subject":"[^"]+\.events\.schedule\./.test(l) || /"type":"Schedule[A-Z]/.test(l);

describe('schedule events in a log folded without them (an older backend)', () => {
  it('leave every other aggregate as the full fold has it', () => {
    const full = replayView(replay(lines).projection, []);
    const without = replayView(replay(lines.filter((l) => !isScheduleLine(l))).projection, []);
    const { schedules, ...rest } = full;
    expect(Object.keys(schedules ?? {})).toEqual(['every2s', 'nightly', 'hourly']);
    expect(without).toEqual(rest);
    expect(without).not.toHaveProperty('schedules');
  });
});
