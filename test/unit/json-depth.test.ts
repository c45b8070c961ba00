import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from '../../src/json-depth.js';

describe('nestsDeeperThan', () => {
  it('counts arrays and objects, not scalars', () => {
    expect(nestsDeeperThan('x', 0)).toBe(false);
    expect(nestsDeeperThan(null, 0)).toBe(false);
    expect(nestsDeeperThan([], 0)).toBe(true);
    expect(nestsDeeperThan([], 1)).toBe(false);
    expect(nestsDeeperThan({ a: [1] }, 1)).toBe(true);
    expect(nestsDeeperThan({ a: [1] }, 2)).toBe(false);
    expect(nestsDeeperThan([1, { b: { c: [] } }, 'z'], 3)).toBe(true);
    expect(nestsDeeperThan([1, { b: { c: [] } }, 'z'], 4)).toBe(false);
  });

  it('walks a 100k-deep value without overflowing the stack', () => {
    const levels = 100_000;
    const deep: unknown = JSON.parse('{"a":'.repeat(levels) + '1' + '}'.repeat(levels));
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    expect(nestsDeeperThan(deep, 64)).toBe(true);
    expect(nestsDeeperThan(deep, levels)).toBe(false);
  }, 60_000);

  it('stops on a cyclic value (an SDK caller may pass one) once past the bound', () => {
    const a: unknown[] = [];
    a.push(a);
    expect(nestsDeeperThan(a, 64)).toBe(true);
  });
});
