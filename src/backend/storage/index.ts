/** The storage component's entrance: what the rest of Sonar may use of it. */
export { checkDurability } from './durability-check.js';
export { eventsBoundRefusal, eventsStoreRoom, resolveEventsMaxBytes } from './events-store-room.js';
export { whenPlaceable } from './placement-wait.js';
export {
  approxSize,
  newWorkBytes,
  openTasks,
  storeFullFromServer,
  storeRoom,
} from './store-room.js';
export type { EventsStoreUsage } from './store-room.js';
export { TASK_STATES, tasksByState } from './task-counts.js';
export { deleteIfThere, scanStream } from './stream-scan.js';
