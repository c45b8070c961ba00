import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../actors/errors.js';
import {
  BASE_RESERVE_MIN_BYTES,
  OPEN_TASK_RESERVE_BYTES,
  SMALLEST_RUN_BYTES,
  approxSize,
  eventsMaxBytesFor,
  newWorkBytes,
  storeFullError,
  storeRoom,
} from '../../src/backend/storage/store-room.js';
import { safeMaxBytes } from '../../streams/provision.js';

const MiB = 1024 * 1024;

describe('storeRoom', () => {
  it('has no free figure and no verdict for an unbounded log', () => {
    expect(storeRoom({ bytes: 5 * MiB, maxBytes: -1 }, 10)).toMatchObject({
      freeBytes: null,
      full: null,
    });
  });

  it('keeps a share for the events open tasks have still to append', () => {
    const room = storeRoom({ bytes: 1 * MiB, maxBytes: 2 * MiB }, 100);
    expect(room.reservedBytes).toBe(BASE_RESERVE_MIN_BYTES + 100 * OPEN_TASK_RESERVE_BYTES);
    expect(storeRoom({ bytes: 0, maxBytes: 100 * MiB }, 0).reservedBytes).toBe(2 * MiB);
    expect(room.freeBytes).toBe(1 * MiB - room.reservedBytes);
    expect(room.full).toBe(false);
  });

  it('is full when not even a one-task run without input fits', () => {
    const reserved = Math.ceil(4 * MiB * 0.02);
    const edge = 4 * MiB - reserved - SMALLEST_RUN_BYTES;
    expect(storeRoom({ bytes: edge, maxBytes: 4 * MiB }, 0).full).toBe(false);
    expect(storeRoom({ bytes: edge + 1, maxBytes: 4 * MiB }, 0).full).toBe(true);
    expect(storeRoom({ bytes: 5 * MiB, maxBytes: 4 * MiB }, 0).full).toBe(true);
  });

  it('charges new work its specs plus each task overhead and reserve', () => {
    expect(newWorkBytes(60, 6_000_000)).toBe(6_000_000 + 60 * (1024 + OPEN_TASK_RESERVE_BYTES));
  });
});

describe('eventsMaxBytesFor', () => {
  it('takes a size as given', () => {
    expect(eventsMaxBytesFor(8 * MiB, -1)).toBe(8 * MiB);
    expect(eventsMaxBytesFor(8 * MiB, 100 * MiB)).toBe(8 * MiB);
  });

  it('auto: half the account storage limit, or no bound without one', () => {
    expect(eventsMaxBytesFor('auto', 48 * MiB)).toBe(24 * MiB);
    expect(eventsMaxBytesFor('auto', -1)).toBe(-1);
    expect(eventsMaxBytesFor('auto', 0)).toBe(-1);
  });
});

describe('safeMaxBytes', () => {
  it('applies a bound above what is stored, and none as none', () => {
    expect(safeMaxBytes(8 * MiB, 1 * MiB)).toBe(8 * MiB);
    expect(safeMaxBytes(-1, 100 * MiB)).toBe(-1);
  });

  it('never sets a bound below what is stored: the server would drop the oldest events', () => {
    expect(safeMaxBytes(4 * MiB, 10 * MiB)).toBe(10 * MiB + Math.ceil((4 * MiB) / 10));
    expect(safeMaxBytes(4 * MiB, 4 * MiB)).toBeGreaterThan(4 * MiB);
  });
});

describe('storeFullError', () => {
  it('is store_full, names the setting and what was measured', () => {
    const room = storeRoom({ bytes: 3.9 * MiB, maxBytes: 4 * MiB }, 60);
    const err = storeFullError(room, newWorkBytes(60, 6_000_000));
    expect(err.code).toBe(ErrorCode.StoreFull);
    expect(err.message).toMatch(/^the event log is full: 3\.9 MiB of 4\.0 MiB used/);
    expect(err.message).toContain('SONAR_EVENTS_MAX_BYTES');
    expect(err.message).toContain('60 open tasks');
    expect(err.details).toMatchObject({ maxBytes: 4 * MiB, openTasks: 60 });
  });

  it('sizes read as sizes', () => {
    expect(approxSize(900)).toBe('900 B');
    expect(approxSize(1536)).toBe('1.5 KiB');
    expect(approxSize(200 * MiB)).toBe('200 MiB');
  });
});
