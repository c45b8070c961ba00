import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { ErrorCode, SonarError } from '../actors/errors.js';

/** Another writer moved the aggregate first: reload and re-judge, never overwrite. */
export class ConcurrencyError extends SonarError {
  override readonly name = 'ConcurrencyError';
  constructor(
    readonly subject: string,
    readonly expectedSeq: number,
    options?: ErrorOptions,
  ) {
    super(
      ErrorCode.Conflict,
      `${subject} moved past sequence ${expectedSeq}: another writer appended first`,
      { subject, expectedSeq },
      options,
    );
  }
}

/** The server holds a stream, bucket or consumer whose settings differ from the topology. */
export class TopologyConflictError extends SonarError {
  override readonly name = 'TopologyConflictError';
  constructor(
    readonly resource: string,
    readonly setting: string,
    readonly have: unknown,
    readonly want: unknown,
  ) {
    super(
      ErrorCode.Conflict,
      `${resource}: setting '${setting}' is ${JSON.stringify(have)} on the server, sonar needs ${JSON.stringify(want)}; ` +
        `delete or migrate it by hand`,
      { resource, setting, have, want },
    );
  }
}

export const isConcurrencyError = (e: unknown): e is ConcurrencyError =>
  e instanceof ConcurrencyError;

/**
 * A compare-and-set write (expected last sequence, KV `update`/`create`, object store
 * `previousRevision`) lost: the subject moved, or vanished, since the revision we held.
 */
export const isWrongLastSequence = (err: unknown): boolean =>
  err instanceof JetStreamApiError &&
  (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
    err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);

/** JetStream's codes for "no room": see {@link isStoreFullApiError}. */
export const StoreFullApiCodes = {
  /** The stream's own bound: `max_bytes` with discard `new` ("maximum bytes exceeded"). */
  StreamStoreFailed: 10077,
  /** The account's or the server's store is used up ("insufficient resources"). */
  InsufficientResources: 10023,
  /** A stream asks to reserve more than is left ("insufficient storage resources available"). */
  StorageResourcesExceeded: 10047,
} as const;

/** JetStream refused a write or a reservation for lack of room. */
export const isStoreFullApiError = (err: unknown): err is JetStreamApiError =>
  err instanceof JetStreamApiError &&
  (Object.values(StoreFullApiCodes) as number[]).includes(err.code);

/** JetStream's code for "no suitable peers for placement" (not in nats.js's list). */
export const NO_PLACEMENT_API_CODE = 10005;

/**
 * The cluster cannot place a stream's replicas now: fewer servers are up, or joined to the
 * meta group, than the replica count asks for.
 */
export const isNoPlacementApiError = (err: unknown): err is JetStreamApiError =>
  err instanceof JetStreamApiError && err.code === NO_PLACEMENT_API_CODE;

/** JetStream answered "stream not found". */
export const isStreamNotFoundApiError = (err: unknown): err is JetStreamApiError =>
  err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;

/** JetStream answered "consumer not found". */
export const isConsumerNotFoundApiError = (err: unknown): err is JetStreamApiError =>
  err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound;

/** A stream read found no message at that sequence or subject (acked, deleted or never there). */
export const isNoMessage = (err: unknown): boolean =>
  err instanceof JetStreamApiError && err.code === JetStreamApiCodes.NoMessageFound;
