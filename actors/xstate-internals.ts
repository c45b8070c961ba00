import { createActor } from 'xstate';
import type { AnyStateMachine } from 'xstate';
import xstatePackage from 'xstate/package.json' with { type: 'json' };
import { assertTestedVersion } from './tested-version.js';

/**
 * Every read of XState's private machine structure, in one place. The transitioner compiles
 * a machine from these; another minor release may reshape them, so loading this module with
 * one refuses to start (package.json pins the tested minor).
 */
export const XSTATE_TESTED = '5.33';
assertTestedVersion('xstate', xstatePackage.version, XSTATE_TESTED);

/** Loose shapes of XState v5's machine internals that the compiler reads. */
export interface StateNodeLike {
  key: string;
  type: string;
  entry: unknown[];
  exit: unknown[];
  always?: unknown[];
  after?: unknown[];
  invoke?: unknown[];
  states: Record<string, StateNodeLike>;
  transitions: Map<
    string,
    { guard?: unknown; target?: { key: string }[]; actions: unknown[]; reenter?: boolean }[]
  >;
}
export interface Implementations {
  guards: Record<string, unknown>;
  actions: Record<string, unknown>;
}

/** A machine's root state node, its `initial` key and its implementations. */
export function machineInternals(machine: AnyStateMachine): {
  root: StateNodeLike;
  initialKey: string | undefined;
  implementations: Implementations;
} {
  const root = (machine as unknown as { root: StateNodeLike }).root;
  return {
    root,
    initialKey: (root as unknown as { config: { initial?: string } }).config.initial,
    implementations: (machine as unknown as { implementations: Implementations }).implementations,
  };
}

/**
 * The built-in guards (`and`, `or`, `not`, `stateIn`) are functions carrying a `check` that
 * XState calls with the snapshot instead of calling the guard itself.
 */
export function isBuiltInGuard(guard: unknown): boolean {
  return typeof guard === 'function' && 'check' in guard;
}

/** `assign(...)` as XState stores it: a function tagged `xstate.assign`, holding the assignment. */
export const isAssign = (a: unknown): a is { assignment: unknown } =>
  typeof a === 'function' && (a as { type?: string }).type === 'xstate.assign';

/**
 * The assignment a function holds when it is an `assign(...)` (its source alone does not show
 * it), else undefined. Read off any function, as the snapshot fingerprint always has.
 */
export const assignmentHeldBy = (fn: unknown): unknown =>
  typeof fn === 'function' ? (fn as { assignment?: unknown }).assignment : undefined;

/**
 * One inert actor scope for `getInitialSnapshot`, reused: the public `initialTransition`
 * builds an actor per call. Actions the initial state runs are handed to `onAction`.
 */
export function inertScope<M extends AnyStateMachine>(
  machine: M,
  onAction: (type: string) => void,
): Parameters<M['getInitialSnapshot']>[0] {
  const self = createActor(machine);
  return {
    self,
    id: '',
    sessionId: '',
    system: self.system,
    defer: () => {},
    logger: () => {},
    stopChild: () => {},
    emit: () => {},
    actionExecutor: (action: { type: string }) => {
      onAction(action.type);
    },
  };
}
