import { describe, expect, it } from 'vitest';
import { hostToken } from '../../src/ids.js';
import { assertId } from '../../streams/ids.js';

describe('hostToken', () => {
  it('makes any host name an id-safe token of at most the length asked', () => {
    expect(hostToken('ip-10-0-0-1.ec2.internal', 40)).toBe('ip-10-0-0-1-ec2-internal');
    expect(hostToken('hôte é', 40)).toBe('h-te--');
    expect(hostToken('a'.repeat(100), 30)).toHaveLength(30);
    expect(() => assertId('workerId', `${hostToken('x.y/z:1', 40)}-abc`)).not.toThrow();
  });
});
