/**
 * The (state x event) matrix of a machine unit test: for one row (a state, or a state with a
 * flag), one test per event type, each either accepted into its target state or refused.
 * Listing every cell is what proves a machine accepts nothing DESIGN.md section 3 does not name.
 */
import { describe, expect, it } from 'vitest';
import type { Accepted } from './unit-machine-harness.js';

/** An accepted cell: the target state, and the actions when the transition asks for any. */
export type Cell = string | readonly [target: string, actions?: string[]];

export interface EventMatrix<Row extends string, Type extends string, S, E> {
  harness: {
    accept: (snap: S, event: E) => Accepted<S>;
    expectRefused: (snap: S, event: E) => void;
  };
  /** For each event type, the event of that type to try in a snapshot. */
  events: Record<Type, (snap: S) => E>;
  /** A fresh snapshot in each row. */
  snapshotOf: Record<Row, () => S>;
  accepted: Record<Row, Partial<Record<Type, Cell>>>;
  /**
   * Which cells first check the snapshot is in the row's state; a row that is not a state value
   * (a flag such as `Ready (starved)`) can use neither.
   */
  rowIsState?: 'refused' | 'all';
  /** The status every accepted transition must end in (every accepted run event is final). */
  acceptedStatus?: 'active' | 'done';
}

/** Returns `matrix(row)`, which declares the `every event type` block for that row. */
export function eventMatrix<
  Row extends string,
  Type extends string,
  S extends { value: unknown; status: string },
  E,
>(spec: EventMatrix<Row, Type, S, E>): (row: Row) => void {
  const { harness, events, snapshotOf, accepted, rowIsState, acceptedStatus } = spec;
  return (row) => {
    describe('every event type', () => {
      for (const type of Object.keys(events) as Type[]) {
        const cell = accepted[row][type];
        if (cell !== undefined) {
          const [target, actions = []] = typeof cell === 'string' ? [cell] : cell;
          it(`${type} -> ${target}`, () => {
            const snap = snapshotOf[row]();
            if (rowIsState === 'all') expect(snap.value).toBe(row);
            const { next, actions: got } = harness.accept(snap, events[type](snap));
            expect(next.value).toBe(target);
            if (acceptedStatus) expect(next.status).toBe(acceptedStatus);
            expect(got).toEqual(actions);
          });
        } else {
          it(`${type} is refused`, () => {
            const snap = snapshotOf[row]();
            if (rowIsState) expect(snap.value).toBe(row);
            harness.expectRefused(snap, events[type](snap));
          });
        }
      }
    });
  };
}
