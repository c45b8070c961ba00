import type { Actor } from 'xstate';
import { ErrorCode } from '../../actors/errors.js';
import { Deadline } from '../grace.js';
import type { Logger } from '../log.js';
import { isApiError } from './api-client.js';
import type { ApiClient } from './api-client.js';
import { isReleasing } from './lifecycle.machine.js';
import type { DrainReason, lifecycleMachine } from './lifecycle.machine.js';
import type { TaskExecution } from './task-execution.js';
import { GOODBYE_RETRY_MS } from './task-execution.js';

/** What the drain needs of its worker, which is Draining when it starts. */
export interface DrainParts {
  workerId: string;
  log: Logger;
  lifecycle: Actor<typeof lifecycleMachine>;
  /** SONAR_STOP_GRACE: what the steps after the deadline may take together. */
  stopGraceMs: number;
  /** Null when the drain came before the join was answered. */
  api: ApiClient | null;
  execution: TaskExecution | null;
  /** The pull loops, which end once the worker stops accepting. */
  pullLoops(): Promise<void>[];
  stopSpotWatch(): void;
  /** Pulses now (`active: false`), when the pulse runs. */
  beat(): Promise<void>;
  /** From now on the key's deletion is the backend recording the `leave` (Pulse.leaving). */
  leaving(): void;
  /** Deletes the worker's registry key, when the pulse runs. */
  removeKey(): Promise<void>;
  close(grace: Deadline): Promise<void>;
  /** The backend answered `conflict`: the worker fails instead of leaving. */
  conflict(err: unknown): Promise<void>;
}

/**
 * The drain (DESIGN.md section 6): pulse `active: false`, tell the backend (`drain`), let
 * running tasks finish until `at` (or until `release` comes earlier), release the rest, wait
 * for the pull loops, `leave`, delete the registry key and close. Everything after the
 * deadline shares one stop grace: a handler that ignores its abort or an unreachable backend
 * is left behind, never waited for. Ends the lifecycle with `stopped`, unless it failed
 * meanwhile.
 */
export async function drainWorker(p: DrainParts, reason: DrainReason, at: Date): Promise<void> {
  const { api, log, execution } = p;
  p.stopSpotWatch();
  log.info('worker draining', { reason, deadline: at.toISOString() });
  await p.beat().catch((err: unknown) => log.warn('pulse failed', { err }));
  try {
    await api?.request(
      'drain',
      { workerId: p.workerId, reason, deadline: at.toISOString() },
      { retryForMs: Math.min(GOODBYE_RETRY_MS, Math.max(0, at.getTime() - Date.now())) },
    );
  } catch (err: unknown) {
    if (isApiError(err, ErrorCode.Conflict)) return p.conflict(err);
    log.warn('drain not recorded', { err });
  }
  const timer = setTimeout(
    () => p.lifecycle.send({ type: 'release' }),
    Math.max(0, at.getTime() - Date.now()),
  );
  const released = untilReleasing(p.lifecycle);
  try {
    await Promise.race([execution?.idle(), released.promise]);
  } finally {
    clearTimeout(timer);
    released.cancel();
  }
  const grace = new Deadline(p.stopGraceMs);
  const bounded = async (what: string, work: Promise<unknown>): Promise<void> => {
    if ((await grace.settle(work)) === 'timeout') {
      log.warn('stop grace ran out: left running', { what });
    }
  };
  if (execution?.busy) {
    p.lifecycle.send({ type: 'release' });
    log.info('drain deadline: releasing tasks', { count: execution.running });
    await bounded('release', execution.releaseAll());
  }
  await bounded('tasks', execution?.idle() ?? Promise.resolve());
  await bounded('pulls', Promise.all(p.pullLoops()));
  if (!p.lifecycle.getSnapshot().matches('Draining')) return; // failed meanwhile
  p.leaving();
  try {
    await api?.request(
      'leave',
      { workerId: p.workerId },
      { retryForMs: Math.min(GOODBYE_RETRY_MS, grace.remainingMs) },
    );
  } catch (err: unknown) {
    log.warn('leave not recorded', { err });
  }
  const removed = p
    .removeKey()
    .catch((err: unknown) => log.warn('registry key not deleted', { err }));
  await bounded('registry key', removed);
  await p.close(grace);
  // It may have failed while the goodbye was said (a connection closed for good).
  if (p.lifecycle.getSnapshot().matches('Draining')) p.lifecycle.send({ type: 'stopped' });
  log.info('worker stopped');
}

/** Resolves once the lifecycle is Releasing (or Failed); `cancel` stops listening. */
function untilReleasing(actor: Actor<typeof lifecycleMachine>): {
  promise: Promise<void>;
  cancel: () => void;
} {
  let cancel = (): void => {};
  const promise = new Promise<void>((resolve) => {
    if (isReleasing(actor.getSnapshot())) return resolve();
    const sub = actor.subscribe((s) => {
      if (isReleasing(s)) resolve();
    });
    cancel = () => sub.unsubscribe();
  });
  return { promise, cancel };
}
