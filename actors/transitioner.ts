import type { AnyStateMachine, ContextFrom, EventFromLogic, InputFrom } from 'xstate';
import { inertScope, isAssign, isBuiltInGuard, machineInternals } from './xstate-internals.js';
import type { Implementations } from './xstate-internals.js';
import { ErrorCode, SonarError } from './errors.js';

/** Named actions a transition asks the backend to carry out (`enqueueFinalization`). */
export type ActionNames = string[];

/**
 * The state of one aggregate as the projection keeps it: the machine's state value, its
 * context, and whether it reached a final state. Plain data (no XState snapshot object), so
 * each held task costs less memory and a fold allocates one small object per event.
 * `machine.resolveState(snap)` turns it back into a full XState snapshot when one is needed.
 */
export interface Snap<C> {
  value: string;
  context: C;
  status: 'active' | 'done';
}

export interface Transitioner<M extends AnyStateMachine> {
  initial(input: InputFrom<M>): [Snap<ContextFrom<M>>, ActionNames];
  /** The next state, or null when the machine does not accept the event. */
  next(
    snap: Snap<ContextFrom<M>>,
    event: EventFromLogic<M>,
  ): [Snap<ContextFrom<M>>, ActionNames] | null;
}

type Args = { context: unknown; event: { type: string } };
type Guard = (args: Args, params: unknown) => boolean;
type Assignment = (args: Args, params: unknown) => Record<string, unknown>;

interface CompiledGuard {
  check: Guard;
  /** The guard's `params`: a value, or a function of the args that XState calls first. */
  params: unknown;
}

interface Compiled {
  guard: CompiledGuard | null;
  target: string | null;
  assigns: Assignment[];
  named: string[];
}

function assignmentOf(a: { assignment: unknown }): Assignment {
  const { assignment } = a;
  if (typeof assignment === 'function') return assignment as Assignment;
  // The object form: each key is a value or a function of the args.
  const parts = Object.entries(assignment as Record<string, unknown>);
  return (args, params) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of parts) {
      out[k] = typeof v === 'function' ? (v as Assignment)(args, params) : v;
    }
    return out;
  };
}

/** A machine feature the fast path does not implement: refused at compile, never guessed. */
const uncompilable = (message: string): SonarError => new SonarError(ErrorCode.Validation, message);

function compileGuard(
  machineId: string,
  guard: unknown,
  impl: Implementations,
): CompiledGuard | null {
  if (guard === undefined) return null;
  const name = typeof guard === 'string' ? guard : (guard as { type?: unknown }).type;
  // and/or/not/stateIn evaluate through XState's own machinery, not by a call.
  if (isBuiltInGuard(guard)) {
    throw uncompilable(
      `${machineId}: guard ${JSON.stringify(name)} (a combinator) cannot be compiled`,
    );
  }
  const fn =
    typeof guard === 'function' ? guard : typeof name === 'string' ? impl.guards[name] : undefined;
  if (typeof fn !== 'function' || isBuiltInGuard(fn)) {
    throw uncompilable(`${machineId}: guard ${JSON.stringify(name)} cannot be compiled`);
  }
  const params =
    typeof guard === 'object' && guard !== null
      ? (guard as { params?: unknown }).params
      : undefined;
  return { check: fn as Guard, params };
}

const passes = (guard: CompiledGuard, args: Args): boolean =>
  guard.check(
    args,
    typeof guard.params === 'function'
      ? (guard.params as (a: Args) => unknown)(args)
      : guard.params,
  );

function compileActions(machineId: string, actions: unknown[], impl: Implementations) {
  const assigns: Assignment[] = [];
  const named: string[] = [];
  for (const action of actions) {
    const resolved = typeof action === 'string' ? impl.actions[action] : action;
    if (isAssign(resolved)) assigns.push(assignmentOf(resolved));
    else if (typeof action === 'string' && typeof resolved === 'function') named.push(action);
    else throw uncompilable(`${machineId}: action ${JSON.stringify(action)} cannot be compiled`);
  }
  return { assigns, named };
}

/**
 * Compiles a flat XState machine into a transition table and folds events with it.
 *
 * Why: XState's public `transition()` builds a throwaway actor per call, and even with one
 * reused actor scope a transition costs far more than a table lookup, plus two snapshot
 * objects; replay folds millions of events (docs/benchmarks.md has the figures). Sonar's machines are flat (atomic and final states, guarded transitions,
 * `assign` and named actions), so the machine's own config is run directly: the guards and
 * assign functions are the machine's, looked up by the same names, and the context is merged
 * the way XState merges it (`Object.assign({}, context, partial)`).
 *
 * The compiler refuses any machine feature it does not implement (nested or parallel states,
 * entry/exit actions, delayed or eventless transitions outside the initial state, invokes), so
 * a machine change cannot silently diverge. Equality with `transition()` is proven by
 * test/unit/transitioner.test.ts (every state x every event, both paths) and by the replay
 * suite, which folds every scenario both ways. `initial()` uses XState itself.
 */
export function createTransitioner<M extends AnyStateMachine>(machine: M): Transitioner<M> {
  const { root, initialKey, implementations: impl } = machineInternals(machine);
  const id = machine.id;
  const table = new Map<string, Map<string, Compiled[]>>();
  const finals = new Set<string>();
  for (const node of Object.values(root.states)) {
    if (Object.keys(node.states).length > 0 || (node.type !== 'atomic' && node.type !== 'final')) {
      throw uncompilable(`${id}: state ${node.key} is not flat; the fast path cannot compile it`);
    }
    if (node.entry.length > 0 || node.exit.length > 0 || (node.invoke ?? []).length > 0) {
      throw uncompilable(`${id}: state ${node.key} has entry/exit/invoke; cannot compile`);
    }
    if ((node.after ?? []).length > 0) throw uncompilable(`${id}: state ${node.key} has after`);
    // An eventless transition is allowed only to settle the initial state, which initial()
    // resolves with XState itself; no event can reach that state afterwards.
    if ((node.always ?? []).length > 0 && (node.key !== initialKey || node.transitions.size > 0)) {
      throw uncompilable(`${id}: state ${node.key} has an eventless transition; cannot compile`);
    }
    if (node.type === 'final') finals.add(node.key);
    const byEvent = new Map<string, Compiled[]>();
    for (const [eventType, defs] of node.transitions) {
      byEvent.set(
        eventType,
        defs.map((d) => {
          if ((d.target ?? []).length > 1) throw uncompilable(`${id}: multiple targets`);
          return {
            guard: compileGuard(id, d.guard, impl),
            target: d.target?.[0]?.key ?? null,
            ...compileActions(id, d.actions, impl),
          };
        }),
      );
    }
    table.set(node.key, byEvent);
  }
  if ((root.transitions?.size ?? 0) > 0)
    throw uncompilable(`${id}: root transitions; cannot compile`);

  const actions: string[] = [];
  const scope = inertScope(machine, (type) => actions.push(type));

  type C = ContextFrom<M>;
  return {
    initial(input) {
      actions.length = 0;
      const s = machine.getInitialSnapshot(scope, input) as {
        value: unknown;
        context: C;
        status: string;
      };
      const snap: Snap<C> = {
        value: String(s.value),
        context: s.context,
        status: s.status === 'done' ? 'done' : 'active',
      };
      return [snap, actions.slice()];
    },
    next(snap, event) {
      if (snap.status !== 'active') return null;
      const candidates = table.get(snap.value)?.get((event as { type: string }).type);
      if (!candidates) return null;
      for (const c of candidates) {
        const args = { context: snap.context as unknown, event: event as { type: string } };
        if (c.guard && !passes(c.guard, args)) continue;
        let context = snap.context;
        for (const assign of c.assigns) {
          context = Object.assign({}, context, assign({ context, event: args.event }, undefined));
        }
        const value = c.target ?? snap.value;
        return [{ value, context, status: finals.has(value) ? 'done' : 'active' }, c.named];
      }
      return null;
    },
  };
}
