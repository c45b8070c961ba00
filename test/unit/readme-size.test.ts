/**
 * The README is a user's first page: what Sonar is, the two commands, the tour, the SDK
 * quickstart, the contract list and links. Everything longer belongs in docs/, so its size
 * is bounded; the contract list grows with every change and must stay one line each.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const MAX_BYTES = 12 * 1024;

describe('README.md', () => {
  it(`stays within ${MAX_BYTES} bytes`, () => {
    const bytes = readFileSync(join(ROOT, 'README.md')).byteLength;
    expect(
      bytes,
      'move detail to docs/ and keep the contract list to one line each',
    ).toBeLessThanOrEqual(MAX_BYTES);
  });
});
