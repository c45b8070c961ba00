import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../../log.js';
import type { BackendContext } from '../context.js';
import { isStoreFullApiError, StoreFullApiCodes } from '../../../streams/errors.js';
import {
  approxSize,
  eventsMaxBytesFor,
  openTasks,
  storeFullError,
  storeRoom,
} from './store-room.js';
import type { EventsStoreUsage, StoreRoom } from './store-room.js';

/**
 * One backend's view of the room left in the events stream: the stream's bytes and bound as
 * the server reports them, and what this backend has admitted but not yet written (so that
 * concurrent submit chunks are not all admitted into the same room).
 */
export class EventsStoreRoom {
  private admittedBytes = 0;
  private lastRoom: StoreRoom | null = null;

  constructor(private readonly ctx: BackendContext) {}

  /** The last room read, or null before the first read. */
  get last(): StoreRoom | null {
    return this.lastRoom;
  }

  async usage(): Promise<EventsStoreUsage> {
    const info = await this.ctx.jsm.streams.info(this.ctx.names.streams.events);
    return { bytes: info.state.bytes, maxBytes: info.config.max_bytes ?? -1 };
  }

  /** Reads the stream now and judges the room with the projection's open tasks. */
  async room(): Promise<StoreRoom> {
    this.lastRoom = storeRoom(await this.usage(), openTasks(this.ctx.loop.projection));
    return this.lastRoom;
  }

  /**
   * Admits new work that will append about `neededBytes`, or refuses it with
   * StoreFullError before anything is written. Call the returned release once the work's
   * writes are done (landed or failed): from then on the stream's own count holds them.
   *
   * `begun`: the work belongs to a run that `submit.begin` admitted whole, so it may use the
   * base reserve too: the events of tasks running meanwhile must not cut an admitted run short.
   */
  async admit(neededBytes: number, opts: { begun?: boolean } = {}): Promise<() => void> {
    const room = await this.room();
    const free =
      room.freeBytes === null ? null : room.freeBytes + (opts.begun ? room.baseReserveBytes : 0);
    if (free !== null && this.admittedBytes + neededBytes > free) {
      throw storeFullError(
        { ...room, reservedBytes: room.reservedBytes + this.admittedBytes },
        neededBytes,
      );
    }
    this.admittedBytes += neededBytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.admittedBytes -= neededBytes;
    };
  }
}

const rooms = new WeakMap<BackendContext, EventsStoreRoom>();

/** The backend's one {@link EventsStoreRoom} (made on first use). */
export function eventsStoreRoom(ctx: BackendContext): EventsStoreRoom {
  let room = rooms.get(ctx);
  if (!room) {
    room = new EventsStoreRoom(ctx);
    rooms.set(ctx, room);
  }
  return room;
}

/**
 * The events stream's byte bound for `SONAR_EVENTS_MAX_BYTES` (see eventsMaxBytesFor): reads
 * the account's JetStream storage limit for `auto`, and says so when no bound results.
 */
export async function resolveEventsMaxBytes(
  jsm: JetStreamManager,
  setting: number | 'auto',
  log: Logger,
): Promise<number> {
  const limit = setting === 'auto' ? (await jsm.getAccountInfo()).limits.max_storage : -1;
  const bound = eventsMaxBytesFor(setting, limit);
  if (bound <= 0) {
    log.warn(
      'the events stream has no byte bound: a full JetStream store would stop the registry and the leader lock too; set SONAR_EVENTS_MAX_BYTES (about half the server max_file_store)',
    );
  }
  return bound;
}

/**
 * The server refuses a stream whose `max_bytes` it cannot reserve (err 10047): say which
 * setting asked for it. Any other error is returned as is.
 */
export function eventsBoundRefusal(err: unknown, eventsMaxBytes: number): unknown {
  if (!(
    eventsMaxBytes > 0 &&
    isStoreFullApiError(err) &&
    err.code === StoreFullApiCodes.StorageResourcesExceeded
  ))
    return err;
  return new Error(
    `SONAR_EVENTS_MAX_BYTES (${approxSize(eventsMaxBytes)}) is more than the JetStream store can reserve (${err.message}): lower it under the server's max_file_store`,
    { cause: err },
  );
}
