import { describe, expect, it } from 'vitest';
import { purgedEvents } from '../../src/backend/snapshots/snapshot.js';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('SONAR_ALLOW_SNAPSHOT_LOSS', () => {
  it('is absent (false) unless set', () => {
    expect(loadConfig({})).not.toHaveProperty('allowSnapshotLoss');
    expect(loadConfig({ SONAR_ALLOW_SNAPSHOT_LOSS: '' })).not.toHaveProperty('allowSnapshotLoss');
  });

  it('reads 1/true/yes/on and 0/false/no/off, and the flag', () => {
    for (const v of ['1', 'true', 'YES', ' on ']) {
      expect(loadConfig({ SONAR_ALLOW_SNAPSHOT_LOSS: v }).allowSnapshotLoss).toBe(true);
    }
    for (const v of ['0', 'false', 'no', 'off']) {
      expect(loadConfig({ SONAR_ALLOW_SNAPSHOT_LOSS: v }).allowSnapshotLoss).toBe(false);
    }
    expect(loadConfig({}, { allowSnapshotLoss: '1' }).allowSnapshotLoss).toBe(true);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => loadConfig({ SONAR_ALLOW_SNAPSHOT_LOSS: 'maybe' })).toThrow(
      new ConfigError([
        {
          variable: 'SONAR_ALLOW_SNAPSHOT_LOSS',
          value: 'maybe',
          message: '"maybe" is not a boolean (1, true, 0 or false)',
        },
      ]),
    );
  });
});

describe('purgedEvents', () => {
  it('null for a fresh or a whole stream', () => {
    expect(purgedEvents({ first_seq: 0, last_seq: 0, messages: 0 })).toBeNull();
    expect(purgedEvents({ first_seq: 1, last_seq: 10, messages: 10 })).toBeNull();
  });

  it('counts a purged head, holes left by purges by subject, and an emptied stream', () => {
    // [first_seq, last_seq, messages] of the stream, then the purged count and up to which seq.
    for (const [first_seq, last_seq, messages, count, upToSeq] of [
      [41, 50, 10, 40, 40],
      [1, 17, 8, 9, 0],
      [5, 17, 8, 9, 4],
      [18, 17, 0, 17, 17],
    ] as const) {
      expect(purgedEvents({ first_seq, last_seq, messages })).toEqual({ count, upToSeq });
    }
  });
});
