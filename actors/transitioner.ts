import { createActor } from 'xstate';
import type { AnyStateMachine, EventFromLogic, InputFrom, SnapshotFrom } from 'xstate';

/** Named actions a transition asks the backend to carry out (`enqueueFinalization`). */
export type ActionNames = string[];

export interface Transitioner<M extends AnyStateMachine> {
  initial(input: InputFrom<M>): [SnapshotFrom<M>, ActionNames];
  /** The next snapshot, or null when the machine does not accept the event. */
  next(snapshot: SnapshotFrom<M>, event: EventFromLogic<M>): [SnapshotFrom<M>, ActionNames] | null;
}

/**
 * The fast path of XState's public `transition()`. That function builds a throwaway actor for
 * every call (~46k/s on these machines); replay folds millions of events, so this builds one
 * inert actor scope per machine and reuses it (~4x faster, NATS-2.9.md). It must stay equal
 * to `transition()`: test/unit/transitioner.test.ts and the replay suite check both paths on
 * every scenario.
 */
export function createTransitioner<M extends AnyStateMachine>(machine: M): Transitioner<M> {
  const actions: string[] = [];
  const self = createActor(machine);
  const scope = {
    self,
    id: '',
    sessionId: '',
    system: self.system,
    defer: () => {},
    logger: () => {},
    stopChild: () => {},
    emit: () => {},
    actionExecutor: (action: { type: string }) => {
      actions.push(action.type);
    },
  } as unknown as Parameters<M['transition']>[2];
  const holder = self as unknown as { _snapshot: unknown };
  return {
    initial(input) {
      actions.length = 0;
      const snapshot = machine.getInitialSnapshot(scope, input) as SnapshotFrom<M>;
      return [snapshot, actions.slice()];
    },
    next(snapshot, event) {
      actions.length = 0;
      holder._snapshot = snapshot;
      const next = machine.transition(snapshot, event, scope) as SnapshotFrom<M>;
      // XState returns the very same snapshot when no transition is enabled (NATS-2.9.md);
      // every accepted event here assigns or moves, so a new object means accepted. This
      // saves the second walk that `can()` would do.
      return next === snapshot ? null : [next, actions.slice()];
    },
  };
}
