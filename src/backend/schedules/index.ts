/** The schedules component's entrance: what the rest of Sonar may use of it. */
export { ScheduleAdmin } from './schedule-admin.js';
export { ScheduleFirer, scheduleFirer } from './schedule-firer.js';
export type { ScheduleFirerOptions } from './schedule-firer.js';
