import { describe, it, expect } from 'vitest';
import { formatDuration, formatSize, parseDuration, parseSize } from '../../src/duration.js';

describe('parseDuration', () => {
  it.each([
    ['250ms', 250],
    ['5s', 5_000],
    ['10m', 600_000],
    ['72h', 259_200_000],
    ['30d', 2_592_000_000],
    ['0s', 0],
    ['1.5s', 1_500],
    ['.5s', 500],
    ['1h30m', 5_400_000],
    ['1m30s', 90_000],
    ['1d2h3m4s5ms', 93_784_005],
    [' 5 s ', 5_000],
  ])('reads %j as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it('reads plain numbers as milliseconds', () => {
    expect(parseDuration('1500')).toBe(1500);
    expect(parseDuration(1500)).toBe(1500);
    expect(parseDuration(0)).toBe(0);
  });

  it('rounds to whole milliseconds', () => {
    expect(parseDuration('1.6ms')).toBe(2);
  });

  it.each(['5x', '', '   ', 's', '-5s', '5S', '5 sec', '30m1h', '1m1m', '1h-', 'abc'])(
    'refuses %j with the value in the message',
    (text) => {
      expect(() => parseDuration(text)).toThrow(
        `${JSON.stringify(text)} is not a duration (e.g. 5s)`,
      );
    },
  );

  it('refuses negative and non-finite numbers', () => {
    expect(() => parseDuration(-1)).toThrow('-1 is not a duration (e.g. 5s)');
    expect(() => parseDuration(Number.NaN)).toThrow('is not a duration');
    expect(() => parseDuration(Infinity)).toThrow('is not a duration');
  });

  it('throws a plain Error', () => {
    expect(() => parseDuration('5x')).toThrow(Error);
  });
});

describe('parseSize', () => {
  it.each([
    ['100B', 100],
    ['512KiB', 524_288],
    ['256KiB', 262_144],
    ['64MiB', 67_108_864],
    ['1GiB', 1_073_741_824],
    ['1TiB', 1_099_511_627_776],
    ['1.5MiB', 1_572_864],
    ['64mib', 67_108_864],
    [' 8 KiB ', 8_192],
    ['4096', 4_096],
  ])('reads %j as %d bytes', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it('reads numbers as bytes', () => {
    expect(parseSize(2048)).toBe(2048);
  });

  it.each(['64MB', '1KB', '5x', '', 'MiB', '-1KiB', '1 GiB extra'])(
    'refuses %j with the value in the message',
    (text) => {
      expect(() => parseSize(text)).toThrow(`${JSON.stringify(text)} is not a size (e.g. 64MiB)`);
    },
  );

  it('refuses negative numbers', () => {
    expect(() => parseSize(-1)).toThrow('-1 is not a size (e.g. 64MiB)');
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0ms'],
    [250, '250ms'],
    [2_000, '2s'],
    [1_500, '1s500ms'],
    [600_000, '10m'],
    [5_400_000, '1h30m'],
    [259_200_000, '3d'],
    [93_784_005, '1d2h3m4s5ms'],
    [-5_000, '-5s'],
    [1.4, '1ms'],
  ])('writes %d as %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it.each([0, 1, 999, 1_000, 61_001, 3_600_000, 90_061_001, 2_592_000_000])(
    'round-trips %d through parseDuration',
    (ms) => {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    },
  );
});

describe('formatSize', () => {
  it.each([
    [0, '0B'],
    [100, '100B'],
    [1_536, '1536B'],
    [262_144, '256KiB'],
    [67_108_864, '64MiB'],
    [1_073_741_824, '1GiB'],
  ])('writes %d as %j', (bytes, text) => {
    expect(formatSize(bytes)).toBe(text);
    expect(parseSize(text)).toBe(bytes);
  });
});
