/** The snapshots component's entrance: what the rest of Sonar may use of it. */
export {
  isSnapshotLossError,
  loadSnapshot,
  snapshotFingerprint,
  storedSnapshot,
  writeSnapshot,
} from './snapshot.js';
export type { LoadedSnapshot, SnapshotLossError } from './snapshot.js';
export { snapshotter } from './snapshotter.js';
