/**
 * Room in the event log for new work, as pure arithmetic: the backend's admission of submits,
 * `sonar status`, `/readyz` and the metrics all judge "full" with these functions.
 *
 * The events stream has a byte bound of its own (`SONAR_EVENTS_MAX_BYTES`, `max_bytes` with
 * discard `new`) that it reaches before the server's store is used up, so the other streams
 * (the registry, the leader lock, the schedule, results, the finalize queue) keep room. Below
 * that bound, a share is kept for the events that open tasks have still to append (published,
 * started, result, finalized, a retry or two): new work is admitted only into what is left.
 *
 * @module
 */
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import type { Projection } from '../../../actors/projection.js';
import { tasksByState } from './task-counts.js';

/** What an open task may still append: TaskPublished, TaskStarted, a result, TaskFinalized. */
export const OPEN_TASK_RESERVE_BYTES = 4 * 1024;
/** A new task's TaskCreated beyond its spec's JSON: envelope, subject, headers, index. */
export const NEW_TASK_OVERHEAD_BYTES = 1024;
/** Kept for run, step, worker and system events: this share of the bound... */
export const BASE_RESERVE_SHARE = 0.02;
/** ...and at least this much. */
export const BASE_RESERVE_MIN_BYTES = 64 * 1024;
/** `auto`: this share of the account's JetStream storage limit. */
export const AUTO_SHARE_OF_ACCOUNT = 0.5;

/** The events stream as the server reports it; `maxBytes` is -1 when unbounded. */
export interface EventsStoreUsage {
  bytes: number;
  maxBytes: number;
}

/** How much new work still fits; `freeBytes` and `full` are null when the log is unbounded. */
export interface StoreRoom extends EventsStoreUsage {
  /** Kept for the remaining events of `openTasks` and for run, step and worker events. */
  reservedBytes: number;
  /** The part of `reservedBytes` kept for run, step, worker and system events. */
  baseReserveBytes: number;
  openTasks: number;
  /** What new work may still take: bound - stored - reserved (may be negative). */
  freeBytes: number | null;
  /** True when even a one-task run without input would be refused. */
  full: boolean | null;
}

/** What a submit of `tasks` tasks whose specs take `specBytes` of JSON adds to the log. */
export const newWorkBytes = (tasks: number, specBytes: number): number =>
  specBytes + tasks * (NEW_TASK_OVERHEAD_BYTES + OPEN_TASK_RESERVE_BYTES);

/** The smallest submit: one task, no input. "Full" means not even this fits. */
export const SMALLEST_RUN_BYTES = newWorkBytes(1, 0);

/** Tasks that may still append events: every state but the terminal ones. */
export function openTasks(p: Projection): number {
  const c = tasksByState(p);
  return c.Pending + c.Published + c.Running + c.Finalizing + c.Poisoned;
}

export function storeRoom(usage: EventsStoreUsage, openTasks: number): StoreRoom {
  if (usage.maxBytes <= 0) {
    return {
      ...usage,
      reservedBytes: 0,
      baseReserveBytes: 0,
      openTasks,
      freeBytes: null,
      full: null,
    };
  }
  const baseReserveBytes = Math.max(
    BASE_RESERVE_MIN_BYTES,
    Math.ceil(usage.maxBytes * BASE_RESERVE_SHARE),
  );
  const reservedBytes = baseReserveBytes + openTasks * OPEN_TASK_RESERVE_BYTES;
  const freeBytes = usage.maxBytes - usage.bytes - reservedBytes;
  const full = freeBytes < SMALLEST_RUN_BYTES;
  return { ...usage, reservedBytes, baseReserveBytes, openTasks, freeBytes, full };
}

/**
 * The events stream's bound from `SONAR_EVENTS_MAX_BYTES`: a size as given; `auto` takes half
 * the account's JetStream storage limit when it has one (`limits.max_storage` of the account
 * info), the other half being for the other streams. Without one (a server-wide
 * `max_file_store` is not visible to clients) `auto` sets no bound: -1.
 */
export function eventsMaxBytesFor(setting: number | 'auto', accountMaxStorage: number): number {
  if (setting !== 'auto') return setting;
  return accountMaxStorage > 0 ? Math.floor(accountMaxStorage * AUTO_SHARE_OF_ACCOUNT) : -1;
}

/**
 * New work refused because the event log is (nearly) at its bound: wire code `store_full`.
 * Not `unavailable`: a client would retry at once, and nothing changes until space is freed.
 */
export class StoreFullError extends SonarError {
  override readonly name = 'StoreFullError';
  constructor(message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(ErrorCode.StoreFull, message, details, options);
  }
}

/** `1.4 MiB`, `812 KiB`, `900 B`: sizes for messages, where exact bytes only add noise. */
export function approxSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let i = 0;
  while (Math.abs(value) >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${i === 0 || Math.abs(value) >= 100 ? Math.round(value) : value.toFixed(1)} ${units[i]}`;
}

const HOW_TO_FREE =
  'new work is refused until space is freed: finished runs are purged after SONAR_RETENTION, ' +
  'or raise SONAR_EVENTS_MAX_BYTES';

/** The refusal of a submit that needs `neededBytes` when `room` is what is left. */
export function storeFullError(room: StoreRoom, neededBytes: number): StoreFullError {
  return new StoreFullError(
    `the event log is full: ${approxSize(room.bytes)} of ${approxSize(room.maxBytes)} used ` +
      `(SONAR_EVENTS_MAX_BYTES), ${approxSize(room.reservedBytes)} kept for the ` +
      `${room.openTasks} open tasks; this submit needs about ${approxSize(neededBytes)}: ${HOW_TO_FREE}`,
    {
      bytes: room.bytes,
      maxBytes: room.maxBytes,
      reservedBytes: room.reservedBytes,
      openTasks: room.openTasks,
      neededBytes,
    },
  );
}

/** The refusal when the server itself refused a write for lack of room. */
export function storeFullFromServer(cause: Error): StoreFullError {
  return new StoreFullError(
    `the event log is full: the server refused the write (${cause.message}): ${HOW_TO_FREE}`,
    {},
    { cause },
  );
}
