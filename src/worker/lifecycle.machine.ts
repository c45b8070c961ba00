import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';

/** Why a worker drains: SIGTERM (or a call to `drain()`), or its host's spot notice. */
export type DrainReason = 'shutdown' | 'spot-interruption';

/** What happens to a worker process, as the worker itself sees it. */
export type LifecycleEvent =
  | { type: 'start' }
  | { type: 'joined' }
  | { type: 'drain'; reason: DrainReason; deadline: string }
  /** The drain deadline came, or `releaseNow()` was called: what still runs is released. */
  | { type: 'release' }
  | { type: 'stopped' }
  | { type: 'fail'; error: unknown };

export interface LifecycleContext {
  drainReason: DrainReason | null;
  /** ISO time by which running tasks must end; what runs then is released. */
  deadline: string | null;
  error: unknown;
}

/**
 * The worker process's lifecycle (DESIGN.md section 6; the backend's view of a worker is
 * actors/worker/worker.machine.ts). Idle until started; Joining while it enrolls, joins, opens
 * the registry and binds its consumers (an outage here is waited out); Active while it pulls;
 * Draining once told to stop: first Finishing (running tasks may end until the deadline), then
 * Releasing (what still runs is handed back); Stopped once it left, or Failed when the backend
 * says it is Lost or Left (`conflict`), its credential is refused, or its connection closed.
 *
 * Pure: the clock (the drain deadline's timer) and the network stay in the worker, which
 * sends `release` when the deadline comes and `stopped` once the drain's steps are done.
 */
export const lifecycleMachine = setup({
  types: { context: {} as LifecycleContext, events: {} as LifecycleEvent },
  actions: {
    fail: assign(({ event }) => ({ error: (event as { error: unknown }).error })),
    drain: assign(({ event }) => {
      const e = event as Extract<LifecycleEvent, { type: 'drain' }>;
      return { drainReason: e.reason, deadline: e.deadline };
    }),
  },
}).createMachine({
  id: 'workerLifecycle',
  context: { drainReason: null, deadline: null, error: undefined },
  initial: 'Idle',
  states: {
    Idle: {
      on: {
        start: 'Joining',
        // Told to stop before it started: nothing to drain.
        drain: { target: 'Stopped', actions: 'drain' },
      },
    },
    Joining: {
      on: {
        joined: 'Active',
        drain: { target: 'Draining', actions: 'drain' },
        fail: { target: 'Failed', actions: 'fail' },
      },
    },
    Active: {
      on: {
        drain: { target: 'Draining', actions: 'drain' },
        fail: { target: 'Failed', actions: 'fail' },
      },
    },
    Draining: {
      initial: 'Finishing',
      states: {
        Finishing: {
          on: {
            release: 'Releasing',
            // A second stop request while draining: release at once.
            drain: 'Releasing',
          },
        },
        Releasing: {},
      },
      on: {
        stopped: 'Stopped',
        fail: { target: 'Failed', actions: 'fail' },
      },
    },
    Stopped: { type: 'final' },
    Failed: { type: 'final' },
  },
});

export type LifecycleSnapshot = SnapshotFrom<typeof lifecycleMachine>;

/** The worker's public state (`worker.state`): Joining and Active both read `Running`. */
export type WorkerState = 'Idle' | 'Running' | 'Draining' | 'Stopped' | 'Failed';

export function workerStateOf(s: LifecycleSnapshot): WorkerState {
  if (s.matches('Idle')) return 'Idle';
  if (s.matches('Joining') || s.matches('Active')) return 'Running';
  if (s.matches('Draining')) return 'Draining';
  return s.matches('Stopped') ? 'Stopped' : 'Failed';
}

/** Whether pulled messages are started (otherwise they are given back). */
export const isAccepting = (s: LifecycleSnapshot): boolean => s.matches('Active');

/** Whether a task that starts now is released at once, and running ones are being released. */
export const isReleasing = (s: LifecycleSnapshot): boolean =>
  s.matches({ Draining: 'Releasing' }) || s.matches('Failed');

/** Stopped or Failed: nothing more happens. */
export const isEnded = (s: LifecycleSnapshot): boolean => s.status === 'done';
