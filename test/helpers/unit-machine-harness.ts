/**
 * The moves of a machine unit test, for any of the aggregate machines: fold a history that
 * must be accepted, accept one event and see its actions, check that an event is refused, and
 * declare the (state x event) matrix. A refusal must be total: `can()` says no and
 * `transition()` hands back the very same snapshot with no actions.
 */
import { expect } from 'vitest';
import { transition } from 'xstate';
import type { AnyMachineSnapshot, AnyStateMachine, EventFromLogic, SnapshotFrom } from 'xstate';
import { eventMatrix } from './unit-event-matrix.js';
import type { EventMatrix } from './unit-event-matrix.js';

export interface Accepted<S> {
  next: S;
  /** The names of the actions the transition asks for. */
  actions: string[];
}

export interface MachineHarness<M extends AnyStateMachine> {
  /** Folds `events` from `from`, each of which must be accepted. */
  fold: (events: EventFromLogic<M>[], from: SnapshotFrom<M>) => SnapshotFrom<M>;
  /** Asserts `event` is accepted and returns the next snapshot and the names of its actions. */
  accept: (snap: SnapshotFrom<M>, event: EventFromLogic<M>) => Accepted<SnapshotFrom<M>>;
  /** Asserts `event` is refused: `can()` is false and `transition()` gives the same snapshot. */
  expectRefused: (snap: SnapshotFrom<M>, event: EventFromLogic<M>) => void;
  /** This machine's (state x event) matrix, checked with the moves above. */
  eventMatrix: <Row extends string, Type extends string>(
    spec: Omit<EventMatrix<Row, Type, SnapshotFrom<M>, EventFromLogic<M>>, 'harness'>,
  ) => (row: Row) => void;
}

const can = (snap: unknown, event: { type: string }): boolean =>
  (snap as AnyMachineSnapshot).can(event);

export function machineHarness<M extends AnyStateMachine>(machine: M): MachineHarness<M> {
  const harness: MachineHarness<M> = {
    fold: (events, from) => {
      let snap = from;
      for (const event of events) {
        const where = `${String(event.type)} in ${String((snap as AnyMachineSnapshot).value)}`;
        expect(can(snap, event), where).toBe(true);
        snap = transition(machine, snap, event)[0];
      }
      return snap;
    },
    accept: (snap, event) => {
      expect(can(snap, event)).toBe(true);
      const [next, actions] = transition(machine, snap, event);
      expect(next).not.toBe(snap);
      return { next, actions: actions.map((a) => a.type) };
    },
    expectRefused: (snap, event) => {
      expect(can(snap, event)).toBe(false);
      const [next, actions] = transition(machine, snap, event);
      expect(next).toBe(snap);
      expect(actions).toEqual([]);
    },
    eventMatrix: (spec) => eventMatrix({ ...spec, harness }),
  };
  return harness;
}

/** Where an accepted event should have led; only the parts named are checked. */
export interface Landing {
  value: string;
  status?: 'active' | 'done';
  actions?: string[];
  /** Fields the next context must have, as `toMatchObject` sees them. */
  context?: object;
}

export function expectLanded(
  got: Accepted<{ value: unknown; status: string; context: unknown }>,
  want: Landing,
): void {
  expect(got.next.value).toBe(want.value);
  if (want.status !== undefined) expect(got.next.status).toBe(want.status);
  if (want.actions !== undefined) expect(got.actions).toEqual(want.actions);
  if (want.context !== undefined) expect(got.next.context).toMatchObject(want.context);
}
