/** The snapshots component's entrance: what the rest of Sonar may use of it. */
export {
  isSnapshotLossError,
  loadSnapshot,
  purgedEvents,
  snapshotFingerprint,
  storedSnapshot,
  writeSnapshot,
} from './snapshot.js';
export type { LoadedSnapshot, PurgedEvents, SnapshotLossError } from './snapshot.js';
export { snapshotter } from './snapshotter.js';
