import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import { ScheduleAdmin } from '../../schedules/index.js';

/** `schedule.*`: the operator's verbs of `sonar schedule` (docs/schedules.md). */
export function scheduleHandlers(ctx: BackendContext): Handlers {
  const admin = new ScheduleAdmin(ctx, ctx.log.child({ component: 'schedules' }));
  return {
    'schedule.create': (req) => admin.create(req),
    'schedule.list': (req) => admin.list(req),
    'schedule.pause': (req) => admin.move(req, 'SchedulePaused'),
    'schedule.resume': (req) => admin.move(req, 'ScheduleResumed'),
    'schedule.delete': (req) => admin.move(req, 'ScheduleDeleted'),
    'schedule.trigger': (req) => admin.trigger(req),
  };
}
