/**
 * Projection snapshots (DESIGN.md section 2, `sonar_snapshots`): the fold at a stream
 * sequence, kept as the object `projection`, so that a restart loads it and replays only the
 * events after it instead of the whole stream. It is a cache while the stream is whole: a
 * missing, corrupt or old-version snapshot (another format, or a build whose machines or fold
 * code differ) is ignored with a warning, and the stream is replayed in full.
 *
 * Once retention has purged events it is more than a cache: the purged runs live only in it.
 * Then a snapshot of another fingerprint (same format) is loaded anyway, and one that cannot
 * be used at all stops the backend ({@link SnapshotLossError}) unless
 * `SONAR_ALLOW_SNAPSHOT_LOSS` is set.
 *
 * API for other components:
 * - {@link writeSnapshot}`(ctx)` snapshots this backend's projection now, unless the stored
 *   one is as new; resolves to `{ seq, ... }` (every event up to `seq` is in it), or null
 *   when it wrote nothing (the stored one was as new, or another backend wrote meanwhile:
 *   {@link storedSnapshot} then tells the stored one's `seq`).
 *   Retention: call it before purging, and purge only events at or below the returned `seq`
 *   of a snapshot with this build's fingerprint, so that a purged run's final state survives
 *   in a snapshot this build loads exactly.
 * - {@link loadSnapshot}`(deps, { allowLoss })` reads the stored snapshot, or null (with the
 *   reason logged); `Backend.start` passes it to `ProjectionLoop.start`.
 * - {@link storedSnapshot}`(deps)` the stored snapshot's sequence and size, without reading it.
 * - {@link purgedEvents}`(stream.state)` what retention purged from the events stream.
 *
 * When snapshots are written: see `snapshotter.ts` (the leader, every 100k events or 10 min
 * when anything changed; any backend on a clean stop).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { createGunzip, createGzip } from 'node:zlib';
import { ErrorCode, SonarError } from '../../../actors/errors.js';
import { isWrongLastSequence } from '../../../streams/errors.js';
import type { JetStreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { ObjectInfo, ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import * as projectionCode from '../../../actors/projection.js';
import type { Projection } from '../../../actors/projection.js';
import { runMachine } from '../../../actors/run/run.machine.js';
import { stepMachine } from '../../../actors/step/step.machine.js';
import { initialTaskContext, taskMachine } from '../../../actors/task/task.machine.js';
import { scheduleMachine } from '../../../actors/schedule/schedule.machine.js';
import { workerMachine } from '../../../actors/worker/worker.machine.js';
import { assignmentHeldBy } from '../../../actors/xstate-internals.js';
import type { Names } from '../../../streams/names.js';
import type { Logger } from '../../log.js';
import type { ProjectionLoop } from '../projection/index.js';
import {
  READABLE_FORMATS,
  SNAPSHOT_FORMAT,
  SnapshotDecoder,
  SnapshotUnusableError,
  captureProjection,
  encodeCapture,
} from './snapshot-codec.js';
import type { SnapshotHeader } from './snapshot-codec.js';
import { jetstreamOf } from '../../../streams/jetstream-api.js';

/** The object's name in `<prefix>_snapshots`. */
export const SNAPSHOT_OBJECT = 'projection';

/** What writing and loading need from a backend (a BackendContext has it all). */
export interface SnapshotDeps {
  nc: NatsConnection;
  jsm: JetStreamManager;
  names: Names;
  log: Logger;
}

export interface SnapshotWriteDeps extends SnapshotDeps {
  loop: ProjectionLoop;
  nodeId: string;
}

/** A stored snapshot as its object metadata tells it. */
export interface StoredSnapshot {
  seq: number;
  /** Compressed size. */
  bytes: number;
  fingerprint: string;
  format: number;
  /** The object store's revision of it (compare-and-set on the next write). */
  revision: number;
  mtime: string;
}

export interface SnapshotWritten {
  seq: number;
  /** Compressed bytes stored. */
  bytes: number;
  /** JSON bytes before compression. */
  rawBytes: number;
  tasks: number;
  ms: number;
}

export interface LoadedSnapshot {
  header: SnapshotHeader;
  projection: Projection;
  bytes: number;
  ms: number;
}

let fingerprintMemo: string | null = null;

/**
 * A hash of everything that decides what a fold produces: the snapshot format, each
 * machine's config and implementations (function sources included, so a changed guard or
 * assign invalidates old snapshots) and the projection module's functions. A different
 * build (even one only reformatted) gets a different value and replays once in full: slow,
 * never wrong. (Unless events were purged: then the old snapshot is still loaded, see
 * {@link loadSnapshot}.) Changes to projection.ts's private helpers are caught through
 * SNAPSHOT_FORMAT.
 */
export function snapshotFingerprint(): string {
  if (fingerprintMemo !== null) return fingerprintMemo;
  const replacer = (_k: string, v: unknown): unknown => {
    if (typeof v !== 'function') return v;
    const assignment = assignmentHeldBy(v);
    return `${String(v)}${assignment === undefined ? '' : JSON.stringify(assignment, replacer)}`;
  };
  const h = createHash('sha256').update(`format ${SNAPSHOT_FORMAT}\n`);
  for (const m of [taskMachine, stepMachine, runMachine, workerMachine, scheduleMachine]) {
    h.update(JSON.stringify(m.config, replacer) ?? '');
    h.update(JSON.stringify(m.implementations, replacer) ?? '');
  }
  for (const [name, fn] of Object.entries(projectionCode)) {
    h.update(`${name}=${JSON.stringify(fn, replacer) ?? ''}`);
  }
  h.update(String(initialTaskContext));
  fingerprintMemo = h.digest('hex').slice(0, 32);
  return fingerprintMemo;
}

async function openStore(deps: SnapshotDeps): Promise<ObjectStore | null> {
  try {
    return await new Objm(await jetstreamOf(deps.nc, deps.names)).open(
      deps.names.objectStores.snapshots,
    );
  } catch (err: unknown) {
    deps.log.debug('no snapshot store', { err });
    return null;
  }
}

function storedOf(info: ObjectInfo | null): StoredSnapshot | null {
  if (!info || info.deleted) return null;
  const m = info.metadata ?? {};
  return {
    seq: Number(m['seq'] ?? -1),
    bytes: info.size,
    fingerprint: m['fingerprint'] ?? '',
    format: Number(m['format'] ?? -1),
    revision: info.revision,
    mtime: info.mtime,
  };
}

/** The stored snapshot's metadata, or null when there is none. */
export async function storedSnapshot(deps: SnapshotDeps): Promise<StoredSnapshot | null> {
  const os = await openStore(deps);
  return os ? storedOf(await os.info(SNAPSHOT_OBJECT)) : null;
}

const writes = new WeakMap<ProjectionLoop, Promise<unknown>>();

/**
 * Snapshots the loop's projection as it is now, unless the stored snapshot already covers
 * this sequence (same build). Writes from one process are serialized; between processes the
 * write is a compare-and-set on the object's revision, so a slower writer never replaces a
 * newer snapshot with an older one (it gets null back).
 *
 * The projection is copied synchronously (references, so quickly) and then encoded,
 * gzip'd (off the main thread) and uploaded in 128 KiB chunks over many event-loop turns,
 * while the loop goes on folding.
 */
export function writeSnapshot(deps: SnapshotWriteDeps): Promise<SnapshotWritten | null> {
  const prev = writes.get(deps.loop) ?? Promise.resolve();
  const next = prev.then(
    () => writeNow(deps),
    () => writeNow(deps),
  );
  writes.set(deps.loop, next);
  return next;
}

async function writeNow(deps: SnapshotWriteDeps): Promise<SnapshotWritten | null> {
  const started = performance.now();
  const os = await openStore(deps);
  if (!os) return null;
  // A deleted object still has a revision (its delete marker): the compare-and-set needs it.
  const raw = await os.info(SNAPSHOT_OBJECT);
  const stored = storedOf(raw);
  const fingerprint = snapshotFingerprint();
  const { loop } = deps;
  if (stored && stored.fingerprint === fingerprint && stored.seq >= loop.position) return null;
  const stream = await deps.jsm.streams.info(deps.names.streams.events);
  // Captured in one synchronous step: position, skipped count and projection agree.
  const capture = captureProjection(loop.projection, {
    fingerprint,
    seq: loop.position,
    skipped: loop.skipped,
    stream: { name: deps.names.streams.events, created: stream.created },
    writtenAt: new Date().toISOString(),
    by: deps.nodeId,
  });
  let rawBytes = 0;
  const lines = Readable.from(
    (function* () {
      for (const s of encodeCapture(capture)) {
        const b = Buffer.from(s);
        rawBytes += b.byteLength;
        yield b;
      }
    })(),
  );
  // Level 1: JSON lines still shrink well, for much less CPU than level 6 (docs/benchmarks.md).
  const gz = lines.pipe(createGzip({ level: 1, chunkSize: 128 * 1024 }));
  const body = Readable.toWeb(gz) as unknown as ReadableStream<Uint8Array>;
  let info: ObjectInfo;
  try {
    info = await os.put(
      {
        name: SNAPSHOT_OBJECT,
        description: 'projection snapshot (a cache: rebuilt from SONAR_EVENTS when unusable)',
        metadata: {
          seq: String(capture.header.seq),
          fingerprint,
          format: String(SNAPSHOT_FORMAT),
        },
      },
      body,
      { previousRevision: raw?.revision ?? 0 },
    );
  } catch (err: unknown) {
    lines.destroy();
    if (isWrongLastSequence(err)) {
      deps.log.debug('snapshot not written: another backend wrote one meanwhile');
      return null;
    }
    throw err;
  }
  const written: SnapshotWritten = {
    seq: capture.header.seq,
    bytes: info.size,
    rawBytes,
    tasks: capture.header.counts.tasks,
    ms: Math.round(performance.now() - started),
  };
  deps.log.info('projection snapshot written', { ...written });
  return written;
}

/**
 * Events retention removed from the events stream. Nothing else removes any (the stream is
 * kept whole, DESIGN.md section 2), so the stream's last sequence minus the messages it holds
 * counts them: purges by subject leave holes anywhere, and the first sequence stays 1 as long
 * as the first event (a worker's or the leader's, never purged) is kept.
 */
export interface PurgedEvents {
  /** Events purged. */
  count: number;
  /** Every event up to this sequence is gone (the stream's first sequence minus 1). */
  upToSeq: number;
}

/** What retention purged from the events stream, or null when nothing was. */
export function purgedEvents(state: {
  first_seq: number;
  last_seq: number;
  messages: number;
}): PurgedEvents | null {
  const count = state.last_seq - state.messages;
  if (count <= 0) return null;
  // An emptied stream's first sequence is last_seq + 1.
  return { count, upToSeq: Math.max(0, Math.min(state.first_seq, state.last_seq + 1) - 1) };
}

/** `events up to seq 40` when the purge took the head of the stream, else `12 events`. */
const purgedText = (p: PurgedEvents): string =>
  p.count === p.upToSeq ? `events up to seq ${p.upToSeq}` : `${p.count} events`;

/**
 * The backend refused to start (SONAR_ALLOW_SNAPSHOT_LOSS unset): retention purged events,
 * so runs live only in the projection snapshot, and the snapshot cannot be used.
 */
export class SnapshotLossError extends SonarError {
  override readonly name = 'SnapshotLossError';
  constructor(
    readonly why: string,
    readonly purged: PurgedEvents,
    stream: string,
  ) {
    super(
      ErrorCode.Unavailable,
      `projection snapshot unusable (${why}) while ${purgedText(purged)} were purged from ` +
        `${stream}: runs whose events were purged live only in that snapshot and would be lost; ` +
        'restore a usable snapshot or run the build that wrote it, or set ' +
        'SONAR_ALLOW_SNAPSHOT_LOSS=1 to replay what is left anyway',
      { why, purgedEvents: purged.count, purgedUpToSeq: purged.upToSeq, stream },
    );
  }
}

export const isSnapshotLossError = (err: unknown): err is SnapshotLossError =>
  err instanceof SnapshotLossError;

export interface LoadSnapshotOptions {
  /**
   * `SONAR_ALLOW_SNAPSHOT_LOSS`: when events were purged and the snapshot is unusable, warn
   * and replay what is left instead of throwing {@link SnapshotLossError}.
   * @defaultValue false
   */
  allowLoss?: boolean;
}

/**
 * The stored snapshot, decoded, when it can be used: taken from the current events stream
 * (same creation time), not ahead of it, in this build's SNAPSHOT_FORMAT, and of this build's
 * fingerprint. Otherwise null, with a warning naming why; the caller replays the whole stream.
 *
 * Once retention purged events, the purged runs live only in the snapshot, and a full replay
 * would drop them:
 * - a snapshot of another fingerprint (an upgrade changed machine or fold code) but the same
 *   format is loaded anyway, with a warning; the events after it are folded by this build;
 * - a snapshot that cannot be used at all (none, another format, corrupt, truncated, another
 *   stream) throws {@link SnapshotLossError}, unless `allowLoss` (then: warn, null).
 * With nothing purged, a full replay is exact, and another fingerprint's snapshot is ignored.
 */
export async function loadSnapshot(
  deps: SnapshotDeps,
  opts: LoadSnapshotOptions = {},
): Promise<LoadedSnapshot | null> {
  const started = performance.now();
  const os = await openStore(deps);
  const stream = await deps.jsm.streams.info(deps.names.streams.events);
  const purged = purgedEvents(stream.state);
  const unusable = (why: string, meta: Record<string, unknown> = {}): null => {
    if (purged && opts.allowLoss !== true) {
      throw new SnapshotLossError(why, purged, deps.names.streams.events);
    }
    deps.log.warn(`projection snapshot not used: ${why}; replaying the whole stream`, {
      ...meta,
      ...(purged && {
        purgedEvents: purged.count,
        purgedUpToSeq: purged.upToSeq,
        note: 'SONAR_ALLOW_SNAPSHOT_LOSS: runs whose events were purged are not in the replay',
      }),
    });
    return null;
  };
  const stored = os ? storedOf(await os.info(SNAPSHOT_OBJECT)) : null;
  if (!os || !stored) {
    if (stream.state.messages === 0 && !purged) return null; // a fresh stream: nothing to miss
    return unusable('none stored');
  }
  if (!READABLE_FORMATS.includes(stored.format)) {
    return unusable(
      `written by another version (snapshot format ${stored.format}, this build reads ${SNAPSHOT_FORMAT})`,
      { format: stored.format },
    );
  }
  const own = snapshotFingerprint();
  // Nothing purged: the full replay is exact, so another build's fold is not wanted.
  if (stored.fingerprint !== own && !purged) {
    return unusable('written by another version (other machine or fold code)', {
      fingerprint: stored.fingerprint,
    });
  }
  if (stored.seq > stream.state.last_seq) {
    return unusable('it is ahead of the events stream (was the stream recreated?)', {
      seq: stored.seq,
      lastSeq: stream.state.last_seq,
    });
  }
  let decoded: { header: SnapshotHeader; projection: Projection };
  try {
    // The header must carry the fingerprint the object's metadata names.
    decoded = await readObject(os, stored.fingerprint);
  } catch (err: unknown) {
    const reason = err instanceof SnapshotUnusableError ? err.reason : 'unreadable';
    return unusable(reason, { err });
  }
  if (decoded.header.stream.created !== stream.created) {
    return unusable('it was folded from another events stream (recreated since)');
  }
  if (stored.fingerprint !== own && purged) {
    deps.log.warn(
      `projection snapshot built by other machine code is used: ${purgedText(purged)} were ` +
        `purged and live only in it; the events after seq ${decoded.header.seq} are folded by this build`,
      {
        seq: decoded.header.seq,
        fingerprint: stored.fingerprint,
        expected: own,
        purgedEvents: purged.count,
        purgedUpToSeq: purged.upToSeq,
      },
    );
  }
  const ms = Math.round(performance.now() - started);
  deps.log.info('projection snapshot loaded', {
    seq: decoded.header.seq,
    tasks: decoded.header.counts.tasks,
    bytes: stored.bytes,
    ms,
  });
  return { ...decoded, bytes: stored.bytes, ms };
}

/** Streams the object through gunzip into the decoder, line by line. */
async function readObject(
  os: ObjectStore,
  fingerprint: string,
): Promise<{ header: SnapshotHeader; projection: Projection }> {
  const r = await os.get(SNAPSHOT_OBJECT);
  if (!r) throw new SnapshotUnusableError('corrupt', 'snapshot vanished while being read');
  // Settled by the store when the last chunk came (or the read failed): never left unhandled.
  const readError = r.error.then(
    (e) => e,
    (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
  );
  const decoder = new SnapshotDecoder({ fingerprint });
  const gunzip = Readable.fromWeb(r.data).pipe(createGunzip({ chunkSize: 256 * 1024 }));
  // Decodes UTF-8 across chunk boundaries.
  gunzip.setEncoding('utf8');
  let rest = '';
  try {
    for await (const chunk of gunzip as AsyncIterable<string>) {
      const text = rest + chunk;
      let from = 0;
      for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', from)) {
        decoder.push(text.slice(from, nl));
        from = nl + 1;
      }
      rest = text.slice(from);
    }
  } finally {
    gunzip.destroy();
  }
  // The object store checks the digest once the last chunk came: a mismatch lands here.
  const err = await readError;
  if (err) throw new SnapshotUnusableError('corrupt', err.message, { cause: err });
  decoder.push(rest);
  return decoder.finish();
}
