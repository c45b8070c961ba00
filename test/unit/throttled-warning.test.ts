import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { ThrottledWarning } from '../../src/throttled-warning.js';

function logged(): { log: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    component: 'test',
    level: 'warn',
    destination: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  return { log, lines };
}

describe('ThrottledWarning', () => {
  it('writes the first at once, then nothing within the gap', () => {
    const { log, lines } = logged();
    const w = new ThrottledWarning(log, 'messages ignored', 'ignored', 60_000);
    for (let i = 0; i < 1000; i++) w.note({ subject: `s.${i}` });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: 'messages ignored', subject: 's.0', ignored: 1 });
  });

  it('counts what happened since the line before', () => {
    const { log, lines } = logged();
    const w = new ThrottledWarning(log, 'requests refused', 'refused', 0);
    w.note({ verb: 'start' });
    w.note({ verb: 'result' });
    expect(lines.map((l) => [l.verb, l.refused])).toEqual([
      ['start', 1],
      ['result', 1],
    ]);
  });
});
